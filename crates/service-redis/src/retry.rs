//! The durable webhook retry schedule (SPEC: with the durable key-value queue, retries
//! are delayed jobs that survive restarts): a sorted set of delivery ids by due time.

use std::fmt;
use std::sync::LazyLock;

use async_trait::async_trait;
use redis::Script;
use redis::aio::ConnectionManager;
use service_types::Timestamp;
use service_webhooks::RetryQueue;
use uuid::Uuid;

use crate::RedisBus;

/// Takes the jobs due by a time off the set, in one step so two instances never take
/// one job. KEYS: the set. ARGV: now (ms), limit.
static TAKE_DUE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
if #due > 0 then
  redis.call('ZREM', KEYS[1], unpack(due))
end
return due
",
    )
});

/// Webhook retries as delayed jobs on Redis.
#[derive(Clone)]
pub struct RedisRetryQueue {
    connection: ConnectionManager,
    key: String,
}

impl fmt::Debug for RedisRetryQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisRetryQueue")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl RedisRetryQueue {
    /// The retry queue on the same Redis, connection and key prefix as `bus`.
    pub fn of(bus: &RedisBus) -> Self {
        Self {
            connection: bus.shared.connection.clone(),
            key: format!("{}:webhooks:due", bus.shared.keys.prefix()),
        }
    }
}

fn millis(at: Timestamp) -> i64 {
    at.unix_micros().div_euclid(1000)
}

#[async_trait]
impl RetryQueue for RedisRetryQueue {
    async fn schedule(&self, delivery_id: Uuid, at: Timestamp) -> Result<(), String> {
        redis::cmd("ZADD")
            .arg(&self.key)
            .arg(millis(at))
            .arg(delivery_id.to_string())
            .query_async::<()>(&mut self.connection.clone())
            .await
            .map_err(|error| error.to_string())
    }

    async fn take_due(&self, now: Timestamp, limit: usize) -> Result<Vec<Uuid>, String> {
        let due: Vec<String> = TAKE_DUE
            .key(&self.key)
            .arg(millis(now))
            .arg(limit.max(1))
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(|error| error.to_string())?;
        Ok(due
            .iter()
            .filter_map(|id| match Uuid::parse_str(id) {
                Ok(id) => Some(id),
                Err(_) => {
                    tracing::error!(id, "a webhook retry job is not a delivery id");
                    None
                }
            })
            .collect())
    }
}
