// The clients' package manifests as their registries read them: the PHP client's composer.json
// against composer's schema, and one license (LICENSE, MIT) named alike by npm, Python and PHP.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "..", "..");
const phpDir = join(root, "clients", "php");
const composer = JSON.parse(readFileSync(join(phpDir, "composer.json"), "utf8")) as Record<
  string,
  unknown
>;

/** The top-level properties of composer's schema (Composer 2.5's res/composer-schema.json). */
const COMPOSER_PROPERTIES = new Set([
  "_comment",
  "abandoned",
  "archive",
  "authors",
  "autoload",
  "autoload-dev",
  "bin",
  "config",
  "conflict",
  "default-branch",
  "description",
  "dist",
  "extra",
  "funding",
  "homepage",
  "include-path",
  "keywords",
  "license",
  "minimum-stability",
  "name",
  "non-feature-branches",
  "prefer-stable",
  "provide",
  "readme",
  "replace",
  "repositories",
  "require",
  "require-dev",
  "scripts",
  "scripts-descriptions",
  "source",
  "suggest",
  "support",
  "target-dir",
  "time",
  "type",
  "version",
]);
/** composer's pattern for a package name (vendor/project). */
const COMPOSER_NAME = /^[a-z0-9]([_.-]?[a-z0-9]+)*\/[a-z0-9](([_.]|-{1,2})?[a-z0-9]+)*$/;

describe("clients/php/composer.json", () => {
  it("uses only composer's properties, with a valid name, type and description", () => {
    expect(Object.keys(composer).filter((key) => !COMPOSER_PROPERTIES.has(key))).toEqual([]);
    expect(composer.name).toMatch(COMPOSER_NAME);
    expect(composer.type).toBe("library");
    expect(typeof composer.description).toBe("string");
  });

  it("names its license, MIT, as the repository's LICENSE", () => {
    expect(composer.license).toBe("MIT");
  });

  it("requires PHPUnit for development, at the major version its phpunit.xml is written for", () => {
    const dev = composer["require-dev"] as Record<string, string>;
    expect(Object.keys(dev)).toEqual(["phpunit/phpunit"]);
    // phpunit.xml names its schema's version (9.6): the constraint must admit it, and no 10.
    const xml = readFileSync(join(phpDir, "phpunit.xml"), "utf8");
    const schema = /schema\.phpunit\.de\/(\d+)\.(\d+)\//.exec(xml);
    expect(schema).not.toBeNull();
    expect(dev["phpunit/phpunit"]).toBe(`^${schema?.[1]}.${schema?.[2]}`);
  });

  it("requires PHP and the extensions the client calls, and no package", () => {
    const require = composer.require as Record<string, string>;
    expect(Object.keys(require).sort()).toEqual(["ext-curl", "ext-json", "php"]);
    expect(require.php).toMatch(/^>=8\.\d+$/);
  });

  it("autoloads PSR-4 namespaces from folders that exist", () => {
    for (const key of ["autoload", "autoload-dev"]) {
      const psr4 = (composer[key] as { "psr-4": Record<string, string> })["psr-4"];
      for (const [namespace, dir] of Object.entries(psr4)) {
        expect(namespace.endsWith("\\"), `${key} ${namespace}`).toBe(true);
        expect(existsSync(join(phpDir, dir)), `${key} ${dir}`).toBe(true);
      }
    }
  });

  // Composer itself, where it is installed (Debian's package `composer`); the checks above hold
  // without it.
  const hasComposer = spawnSync("composer", ["--version"], { stdio: "ignore" }).status === 0;
  it.skipIf(!hasComposer)("passes composer validate --strict", () => {
    const run = spawnSync("composer", ["validate", "--strict", "--no-interaction"], {
      cwd: phpDir,
      encoding: "utf8",
      env: { ...process.env, COMPOSER_ALLOW_SUPERUSER: "1", COMPOSER_NO_AUDIT: "1" },
    });
    expect(run.status, `${run.stdout}${run.stderr}`).toBe(0);
  });
});

describe("one license", () => {
  it("LICENSE is MIT, and npm, Python and PHP name MIT", () => {
    const license = readFileSync(join(root, "LICENSE"), "utf8");
    expect(license.split("\n")[0]).toBe("MIT License");
    expect(license).toContain("Copyright (c) 2026 the delayq authors");
    const npm = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { license: string };
    expect(npm.license).toBe("MIT");
    const pyproject = readFileSync(join(root, "clients", "python", "pyproject.toml"), "utf8");
    expect(pyproject).toMatch(/^license = \{ text = "MIT" \}$/m);
    expect(composer.license).toBe("MIT");
  });
});

describe("one repository address", () => {
  it("package.json, pyproject.toml and composer.json point at the same repository", () => {
    const npm = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
      homepage: string;
      repository: { type: string; url: string };
      bugs: { url: string };
    };
    const repository = npm.repository.url.replace(/^git\+/, "").replace(/\.git$/, "");
    expect(repository).toMatch(/^https:\/\/[^/]+\/[^/]+\/[^/]+$/);
    expect(npm.repository.type).toBe("git");
    expect(npm.homepage.startsWith(repository)).toBe(true);
    const issues = `${repository}/issues`;
    expect(npm.bugs.url).toBe(issues);

    const pyproject = readFileSync(join(root, "clients", "python", "pyproject.toml"), "utf8");
    const table = /^\[project\.urls\]\n((?:\w+ = "[^"]+"\n)+)/m.exec(pyproject)?.[1] ?? "";
    const urls = Object.fromEntries(
      [...table.matchAll(/^(\w+) = "([^"]+)"$/gm)].map((m) => [m[1], m[2]]),
    );
    expect(urls.Repository).toBe(repository);
    expect(urls.Homepage).toBe(repository);
    expect(urls.Issues).toBe(issues);
    expect(urls.Documentation?.startsWith(`${repository}/`)).toBe(true);

    const support = composer.support as { issues: string; source: string };
    expect(support.issues).toBe(issues);
    expect(support.source.startsWith(`${repository}/`)).toBe(true);
    expect(String(composer.homepage).startsWith(`${repository}/`)).toBe(true);
  });
});
