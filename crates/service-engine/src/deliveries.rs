//! Webhooks, engine side: a run's URL checked at creation, and the deliveries
//! routes' calls (rendering and sending a settled run's callback is `callbacks.rs`).

use service_store::DeliveryQuery;
use service_types::Delivery;
use uuid::Uuid;

use crate::auth::Scope;
use crate::webhooks::Outgoing;
use crate::{Engine, EngineError, EngineResult};

impl Engine {
    /// Checks a run's webhook URL at creation.
    pub(crate) fn check_webhook(&self, url: &str) -> EngineResult<()> {
        let Some(webhooks) = &self.inner.webhooks else {
            return Err(EngineError::unprocessable(
                "This server does not send webhooks (none is configured)",
            ));
        };
        webhooks
            .check_url(url)
            .map_err(|reason| EngineError::unprocessable(format!("Invalid webhook URL: {reason}")))
    }

    /// A run's deliveries (`GET /threads/{thread_id}/runs/{run_id}/deliveries`) within
    /// `scope`. They outlive their run and thread, so the path and the owner are
    /// checked against the rows.
    pub(crate) async fn list_deliveries(
        &self,
        thread_id: Uuid,
        run_id: Uuid,
        query: &DeliveryQuery,
        scope: &Scope,
    ) -> EngineResult<Vec<Delivery>> {
        if query
            .limit
            .is_some_and(|limit| limit > self.config().max_page_size)
        {
            return Err(EngineError::unprocessable(format!(
                "limit must be at most {}",
                self.config().max_page_size
            )));
        }
        // A store that records no deliveries has none to list.
        let Some(deliveries) = self.store().deliveries() else {
            return Ok(Vec::new());
        };
        let query = DeliveryQuery {
            enforced: scope.enforced(),
            ..query.clone()
        };
        let mut listed = deliveries.list(run_id, &query).await?;
        listed.retain(|delivery| delivery.thread_id == thread_id);
        // Every delivery of a run goes where the run's webhook says.
        let destination = match self.get_run(Some(thread_id), run_id).await {
            Ok(run) => run.kwargs["webhook"].as_str().map(redacted_destination),
            Err(_) => None,
        };
        for delivery in &mut listed {
            delivery.destination.clone_from(&destination);
        }
        Ok(listed)
    }

    /// Makes a delivery not yet delivered due now and attempts it
    /// (`POST .../deliveries/{delivery_id}/replay`).
    pub(crate) async fn replay_delivery(
        &self,
        thread_id: Uuid,
        run_id: Uuid,
        delivery_id: Uuid,
        scope: &Scope,
    ) -> EngineResult<Delivery> {
        let not_found = || EngineError::not_found(format!("Delivery {delivery_id} not found"));
        let deliveries = self.store().deliveries().ok_or_else(not_found)?;
        let belongs = deliveries.get(delivery_id).await?.is_some_and(|record| {
            record.delivery.run_id == run_id
                && record.delivery.thread_id == thread_id
                && scope.admits(&record.run_metadata)
        });
        if !belongs {
            return Err(not_found());
        }
        let delivery = deliveries.replay(run_id, delivery_id).await?;
        if let Some(webhooks) = &self.inner.webhooks {
            webhooks.send(Outgoing::Recorded(delivery_id));
        }
        Ok(delivery)
    }
}

/// A webhook URL as clients may see it (SPEC console item 9): an HTTP callback's host
/// (and port) and whether a path beyond the root exists, never the path, query or
/// credentials; a channel reply (`channel://<route>/...`) by its channel name only.
pub(crate) fn redacted_destination(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "(not a URL)".into();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if scheme.eq_ignore_ascii_case("channel") {
        return format!("channel {host}");
    }
    let path = rest[end..].split(['?', '#']).next().unwrap_or_default();
    if path.is_empty() || path == "/" {
        host.to_owned()
    } else {
        format!("{host} (with a path)")
    }
}

#[cfg(test)]
mod tests {
    use super::redacted_destination;

    #[test]
    fn destinations_show_the_host_or_the_channel_only() {
        assert_eq!(
            redacted_destination("https://user:pw@hooks.example.com:8443/t/secret?sig=1"),
            "hooks.example.com:8443 (with a path)"
        );
        assert_eq!(
            redacted_destination("http://example.com/?token=x"),
            "example.com"
        );
        assert_eq!(
            redacted_destination("channel://team-slack/C1/17.5?mac=ab"),
            "channel team-slack"
        );
        assert_eq!(redacted_destination("nonsense"), "(not a URL)");
    }
}
