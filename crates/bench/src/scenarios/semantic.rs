//! S5q: semantic store search. The server's `store.index` embeds through an
//! OpenAI-compatible endpoint (`bench-ceiling`'s cheap `/v1/embeddings`), so what is
//! measured is the server: the query's embedding call, the exact (or hnsw) ranking of
//! the namespace's items and the answer. Needs a server started with such an index
//! (see docs/performance.md, "S5q").

use bytes::Bytes;
use serde_json::json;
use uuid::Uuid;

use super::{Bench, contains};

/// Distinct topics the items spread over; a query names one.
const TOPICS: u64 = 100;

impl Bench {
    pub(crate) async fn s5q(&mut self) -> Result<(), String> {
        let items = self.args.store_items.max(1);
        let namespace = json!(["bench", "s5q", Uuid::new_v4().simple().to_string()]);
        self.fill_namespace(
            "S5q",
            "store put with embedding (filling the namespace)",
            &namespace,
            items,
            |i| json!({"i": i, "text": format!("note {i} about topic{} and its details", i % TOPICS)}),
        )
        .await?;
        let search = move |n: u64| {
            Bytes::from(
                json!({"namespace_prefix": namespace, "query": format!("topic{}", n % TOPICS), "limit": 10})
                    .to_string(),
            )
        };
        // The index must be there: a ranked answer has scores, and the best match
        // names the queried topic.
        let found = self
            .http
            .post_json(
                "/store/items/search",
                &serde_json::from_slice(&search(7)).unwrap_or_default(),
            )
            .await?;
        let first = &found["items"][0];
        let ranked = first["score"].as_f64().is_some()
            && first["value"]["text"]
                .as_str()
                .is_some_and(|text| text.contains("topic7 "));
        if !ranked {
            return Err(format!(
                "S5q: the server did not rank by meaning (is store.index configured?): {found}"
            ));
        }
        self.search_loads(
            "S5q",
            "semantic store search (query, limit 10)",
            search,
            |answer| contains(answer, b"\"score\":0.") || contains(answer, b"\"score\":1"),
            json!({"items": items}),
        )
        .await;
        Ok(())
    }
}
