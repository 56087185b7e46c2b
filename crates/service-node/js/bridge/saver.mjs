// The checkpointer runs get: LangGraph.js's BaseCheckpointSaver over the server's own.

import { call, plain } from "./protocol.mjs";

// How long writes wait for the checkpoint they belong to (see ServerSaver.known).
const WRITES_WAIT_MS = 5000;

function coordinates(config) {
  const conf = config?.configurable ?? {};
  return {
    thread_id: conf.thread_id,
    checkpoint_ns: conf.checkpoint_ns ?? "",
    checkpoint_id: conf.checkpoint_id ?? null,
  };
}

function codePointCompare(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

// The run keys the server puts in a run's config metadata. LangGraph.js does not copy
// them into its checkpoints' metadata; the server finds a run's checkpoints by them
// (rollback, and refusing a stopped run's late checkpoints), so the saver does.
const RUN_KEYS = ["run_id", "thread_id", "graph_id", "assistant_id", "run_attempt"];

function runKeys(config) {
  const run = config?.metadata ?? {};
  return Object.fromEntries(RUN_KEYS.filter((key) => key in run).map((key) => [key, run[key]]));
}

export function saverClass(lg, checkpoint) {
  const { BaseCheckpointSaver } = lg;
  const { WRITES_IDX_MAP } = checkpoint;

  /** Keeps checkpoints in the server's own checkpointer (memory or PostgreSQL).
   * Bodies and written values are stored as the serializer's typed bytes, metadata as
   * JSON, so the server can filter history and roll back runs by it. */
  return class ServerSaver extends BaseCheckpointSaver {
    // Checkpoints this process knows the server has. LangGraph stores a checkpoint in
    // the background and may record the next step's writes against it first; the
    // server refuses writes against a checkpoint it does not have, so those wait.
    known = new Map();

    mark(key) {
      let entry = this.known.get(key);
      if (!entry) {
        let resolve;
        const stored = new Promise((done) => (resolve = done));
        entry = { stored, resolve };
        this.known.set(key, entry);
        if (this.known.size > 100_000) this.known.delete(this.known.keys().next().value);
      }
      return entry;
    }

    stored(config) {
      const { thread_id, checkpoint_ns, checkpoint_id } = coordinates(config);
      this.mark(JSON.stringify([thread_id, checkpoint_ns, checkpoint_id])).resolve();
    }

    async typed(value) {
      const [t, bytes] = await this.serde.dumpsTyped(value);
      return { t, b: Buffer.from(bytes).toString("base64") };
    }

    async untyped(stored) {
      return this.serde.loadsTyped(stored.t, new Uint8Array(Buffer.from(stored.b, "base64")));
    }

    async tuple(stored) {
      const writes = await Promise.all(
        (stored.pending_writes ?? []).map(async (write) => {
          const colon = write.channel.indexOf(":");
          const idx = Number(write.channel.slice(0, colon));
          const channel = write.channel.slice(colon + 1);
          return [write.value.p ?? "", write.task_id, idx, channel, await this.untyped(write.value)];
        }),
      );
      writes.sort((a, b) => codePointCompare(a[0], b[0]) || codePointCompare(a[1], b[1]) || a[2] - b[2]);
      const found = {
        config: { configurable: stored.config },
        checkpoint: await this.untyped(stored.checkpoint),
        metadata: stored.metadata ?? {},
        pendingWrites: writes.map(([, task, , channel, value]) => [task, channel, value]),
      };
      if (stored.parent_config) found.parentConfig = { configurable: stored.parent_config };
      this.stored(found.config);
      return found;
    }

    async getTuple(config) {
      const stored = await call("cp.get", coordinates(config));
      return stored === null ? undefined : this.tuple(stored);
    }

    async *list(config, options = {}) {
      const stored = await call("cp.list", {
        ...coordinates(config),
        filter: options.filter ?? null,
        before: options.before?.configurable?.checkpoint_id ?? null,
        limit: options.limit ?? null,
      });
      for (const item of stored) yield await this.tuple(item);
    }

    async put(config, saved, metadata) {
      const { thread_id, checkpoint_ns, checkpoint_id } = coordinates(config);
      await call("cp.put", {
        thread_id,
        checkpoint_ns,
        parent_id: checkpoint_id,
        checkpoint_id: saved.id,
        checkpoint: await this.typed(saved),
        metadata: { ...runKeys(config), ...JSON.parse(JSON.stringify(metadata ?? {}, plain)) },
      });
      this.mark(JSON.stringify([thread_id, checkpoint_ns, saved.id])).resolve();
      return { configurable: { thread_id, checkpoint_ns, checkpoint_id: saved.id } };
    }

    async putWrites(config, writes, taskId, taskPath = "") {
      const at = coordinates(config);
      const { stored } = this.mark(JSON.stringify([at.thread_id, at.checkpoint_ns, at.checkpoint_id]));
      let timer;
      // Stored by another worker or process when this times out: the server decides.
      await Promise.race([stored, new Promise((done) => (timer = setTimeout(done, WRITES_WAIT_MS)))]);
      clearTimeout(timer);
      await call("cp.put_writes", {
        ...at,
        task_id: taskId,
        run_id: config?.metadata?.run_id ?? null,
        writes: await Promise.all(
          writes.map(async ([channel, value], idx) => [
            `${WRITES_IDX_MAP[channel] ?? idx}:${channel}`,
            { ...(await this.typed(value)), p: taskPath ?? "" },
          ]),
        ),
      });
    }

    async deleteThread(threadId) {
      await call("cp.delete_thread", { thread_id: threadId });
    }
  };
}
