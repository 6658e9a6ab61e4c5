import { printProfileSummary } from "../bench/lib/cpu-profile";
printProfileSummary(process.argv[2]!);
