// What a /metrics scrape reads from Redis: topics page by page (listTopics), at most
// DQ_METRICS_MAX_TOPICS of them, so a scrape's Redis cost is bounded whatever the deployment holds.
import type { TopicStats } from "../domain/schemas";
import { scopeAllows, type TopicScope } from "../domain/scope";
import type { DelayQueue } from "../queue";
import type { Counters } from "./counters";
import type { MetricFamily, Sample } from "./prometheus";

/** Topics per listTopics call: the most one call takes. */
export const TOPICS_PER_PAGE = 100;
/** @default for DQ_METRICS_MAX_TOPICS */
export const DEFAULT_METRICS_MAX_TOPICS = 1000;

export type CollectOptions = {
  /** The most topics to read (DQ_METRICS_MAX_TOPICS). */
  maxTopics: number;
  /** Process counters to add to the scrape, if the runtime keeps them. */
  counters?: Counters;
  /** Unix ms, for ages. @default the queue's clock */
  now?: number;
};

/**
 * Reads the topics the queue may see, by name, in pages of 100 (one REST request and 2 + 7–9
 * commands per topic each: see docs/operating.md), until `maxTopics` topics were
 * read or none are left, and turns them into metric families. With a scoped queue only its
 * topics are reported, but the cap counts every topic read.
 */
export async function collectMetrics(
  queue: DelayQueue,
  options: CollectOptions,
): Promise<MetricFamily[]> {
  const topics: TopicStats[] = [];
  let read = 0;
  let requests = 0;
  let after: string | undefined;
  let truncated = false;
  for (;;) {
    const limit = Math.min(TOPICS_PER_PAGE, options.maxTopics - read);
    const page = await queue.topics(after === undefined ? { limit } : { after, limit });
    requests += 1;
    read += limit;
    topics.push(...page.topics);
    if (page.cursor === undefined) break;
    after = page.cursor;
    if (read >= options.maxTopics) {
      truncated = true;
      break;
    }
  }
  const now = options.now ?? queue.clock();
  return [
    ...topicFamilies(
      topics,
      now,
      queue.scope === undefined ? { truncated, requests } : { truncated },
    ),
    ...processFamilies(options, queue.scope),
  ];
}

const STATES = ["delayed", "ready", "reserved", "dead"] as const;

function topicFamilies(
  topics: readonly TopicStats[],
  now: number,
  /** `requests` is left out for a limited token: it counts every topic, others' included. */
  scrape: { truncated: boolean; requests?: number },
): MetricFamily[] {
  const jobs: Sample[] = [];
  const ages: Sample[] = [];
  const paused: Sample[] = [];
  const heldBack: Sample[] = [];
  const heldAges: Sample[] = [];
  for (const stats of topics) {
    const topic = stats.topic;
    for (const state of STATES) jobs.push({ labels: { topic, state }, value: stats.counts[state] });
    const due = stats.oldestDueAt;
    ages.push({
      labels: { topic },
      value: due !== undefined && due < now ? (now - due) / 1000 : 0,
    });
    paused.push({ labels: { topic }, value: stats.config.paused ? 1 : 0 });
    if (stats.heldBack !== undefined) {
      heldBack.push({ labels: { topic }, value: stats.heldBack });
      const since = stats.heldBackSince;
      heldAges.push({
        labels: { topic },
        value: since !== undefined && since < now ? (now - since) / 1000 : 0,
      });
    }
  }
  return [
    {
      name: "delayq_jobs",
      help: 'Jobs per topic and state (delayed, ready, reserved, dead); dead counts are state="dead".',
      type: "gauge",
      samples: jobs,
    },
    {
      name: "delayq_oldest_due_age_seconds",
      help:
        "Seconds since the earliest due time among the topic's waiting jobs (0 when none is " +
        "due yet): how far consumers are behind.",
      type: "gauge",
      samples: ages,
    },
    {
      name: "delayq_topic_paused",
      help: "1 when the topic is paused (hands out nothing), else 0.",
      type: "gauge",
      samples: paused,
    },
    {
      name: "delayq_push_held_back",
      help:
        "Push topics: jobs due and not yet sent, held back by rate or parallelism (or waiting " +
        "for a claim).",
      type: "gauge",
      samples: heldBack,
    },
    {
      name: "delayq_push_held_back_age_seconds",
      help:
        "Push topics: seconds since the earliest due time among the held-back jobs (0 when " +
        "none): how late flow control makes deliveries.",
      type: "gauge",
      samples: heldAges,
    },
    {
      name: "delayq_topics",
      help: "Topics reported by this scrape.",
      type: "gauge",
      samples: [{ value: topics.length }],
    },
    {
      name: "delayq_metrics_topics_truncated",
      help:
        "1 when more topics exist than one scrape reads (DQ_METRICS_MAX_TOPICS): the topics " +
        "after the cap, by name, are missing from this scrape.",
      type: "gauge",
      samples: [{ value: scrape.truncated ? 1 : 0 }],
    },
    {
      name: "delayq_metrics_redis_requests",
      help:
        "Redis REST requests this scrape made (one per 100 topics; not shown to a token " +
        "limited to some topics).",
      type: "gauge",
      samples: scrape.requests === undefined ? [] : [{ value: scrape.requests }],
    },
  ];
}

/**
 * The process counters. A token limited to some topics sees only the series of its topics: not
 * another's, and not the process's own (ticks, payment polls), which tell of other tenants' work.
 */
function processFamilies(options: CollectOptions, scope: TopicScope): MetricFamily[] {
  const counters = options.counters;
  if (!counters) return [];
  const visible = (sample: Sample) =>
    scope === undefined ||
    (sample.labels?.topic !== undefined && scopeAllows(scope, sample.labels.topic));
  return [
    {
      name: "delayq_process_start_time_seconds",
      help:
        "When this process (or Worker isolate) started counting, unix seconds; the *_total " +
        "counters start from zero then.",
      type: "gauge",
      samples: [{ value: Math.floor(counters.startedAt / 1000) }],
    },
    ...counters
      .snapshot()
      .map((family) => ({ ...family, samples: family.samples.filter(visible) })),
  ];
}
