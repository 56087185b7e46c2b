//! Webhook targets (docs/webhooks.md, "Which targets are refused"): the address rules
//! applied to real deliveries over loopback, and what a delivery's `last_error` tells
//! a client about a failure: its class, never socket detail.

mod support;

use std::time::Duration;

use service_webhooks::UrlPolicy;
use support::*;

fn blocking_private_targets() -> WebhookSettings {
    WebhookSettings {
        block_private_targets: true,
        ..fast_settings()
    }
}

/// The run's one delivery once it is dead or delivered.
async fn settled_delivery(engine: &Engine, url: &str) -> Delivery {
    let thread = new_thread(engine).await;
    let run = unscoped(engine)
        .runs()
        .create(RunTarget::Thread(thread), run_body("echo", json!({}), url))
        .await
        .unwrap();
    eventually(|| async {
        let listed = unscoped(engine)
            .deliveries()
            .list(thread, run.run_id, &Default::default())
            .await
            .unwrap();
        listed.into_iter().find(|delivery| {
            matches!(
                delivery.status,
                DeliveryStatus::Dead | DeliveryStatus::Delivered
            )
        })
    })
    .await
}

#[tokio::test]
async fn a_loopback_receiver_is_refused_when_private_targets_are_blocked() {
    let receiver = Receiver::start().await;
    let engine = memory_engine(blocking_private_targets()).await;
    let delivery = settled_delivery(&engine, &receiver.url).await;
    assert_eq!(delivery.status, DeliveryStatus::Dead);
    assert_eq!(delivery.attempt, 1, "a refusal is not retried");
    assert_eq!(
        delivery.last_error.as_deref(),
        Some("refused by policy: loopback address")
    );
    assert!(receiver.received().is_empty());
}

#[tokio::test]
async fn a_loopback_receiver_is_delivered_when_private_targets_are_allowed() {
    let receiver = Receiver::start().await;
    let engine = memory_engine(fast_settings()).await;
    let delivery = settled_delivery(&engine, &receiver.url).await;
    assert_eq!(delivery.status, DeliveryStatus::Delivered);
    assert_eq!(receiver.received().len(), 1);
}

#[tokio::test]
async fn a_name_resolving_to_loopback_is_refused_when_private_targets_are_blocked() {
    let receiver = Receiver::start().await;
    let by_name = receiver.url.replace("127.0.0.1", "localhost");
    let engine = memory_engine(blocking_private_targets()).await;
    let delivery = settled_delivery(&engine, &by_name).await;
    assert_eq!(delivery.status, DeliveryStatus::Dead);
    assert_eq!(
        delivery.last_error.as_deref(),
        Some("refused by policy: loopback address"),
        "judged on the resolved address, not the name's text"
    );
    assert!(receiver.received().is_empty());
}

#[tokio::test]
async fn a_name_is_connected_to_at_the_address_it_resolved_to_when_private_targets_are_allowed() {
    let receiver = Receiver::start().await;
    let by_name = receiver.url.replace("127.0.0.1", "localhost");
    let engine = memory_engine(fast_settings()).await;
    let delivery = settled_delivery(&engine, &by_name).await;
    assert_eq!(delivery.status, DeliveryStatus::Delivered);
    assert_eq!(receiver.received().len(), 1);
}

#[tokio::test]
async fn a_host_named_in_allowed_hosts_is_delivered_though_private_targets_are_blocked() {
    let receiver = Receiver::start().await;
    let settings = WebhookSettings {
        allowed_hosts: Some(vec!["localhost".into(), "127.0.0.1".into()]),
        ..blocking_private_targets()
    };
    let engine = memory_engine(settings).await;
    let by_name = receiver.url.replace("127.0.0.1", "localhost");
    for url in [&receiver.url, &by_name] {
        let delivery = settled_delivery(&engine, url).await;
        assert_eq!(delivery.status, DeliveryStatus::Delivered, "{url}");
    }
    assert_eq!(receiver.received().len(), 2);
}

#[tokio::test]
async fn the_metadata_address_is_refused_by_default_and_permitted_when_named_in_allowed_hosts() {
    let metadata = "http://169.254.169.254/latest/meta-data/iam/security-credentials/";
    let by_default = UrlPolicy::new(&WebhookSettings::default());
    assert_eq!(
        by_default.permit(metadata).unwrap_err(),
        "link-local address"
    );
    let named = UrlPolicy::new(&WebhookSettings {
        allowed_hosts: Some(vec!["169.254.169.254".into()]),
        ..WebhookSettings::default()
    });
    assert!(named.permit(metadata).is_ok());
    // A delivery there is recorded dead without a connection being tried.
    let engine = memory_engine(fast_settings()).await;
    let delivery = settled_delivery(&engine, metadata).await;
    assert_eq!(delivery.status, DeliveryStatus::Dead);
    assert_eq!(delivery.attempt, 1);
    assert_eq!(
        delivery.last_error.as_deref(),
        Some("refused by policy: link-local address")
    );
}

/// A port on loopback that nothing listens on.
async fn closed_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

/// A port on loopback that accepts connections and closes them at once (not HTTP).
async fn slamming_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            drop(socket);
        }
    });
    port
}

#[tokio::test]
async fn last_error_names_the_class_of_failure_without_socket_detail() {
    let settings = WebhookSettings {
        max_attempts: 1,
        ..fast_settings()
    };
    let engine = memory_engine(settings).await;
    let closed = closed_port().await;
    let slamming = slamming_port().await;
    // Nothing listening and a listener that hangs up read the same: the row is no
    // port scanner.
    for url in [
        format!("http://127.0.0.1:{closed}/hook"),
        format!("http://127.0.0.1:{slamming}/hook"),
    ] {
        let delivery = settled_delivery(&engine, &url).await;
        assert_eq!(delivery.status, DeliveryStatus::Dead, "{url}");
        assert_eq!(
            delivery.last_error.as_deref(),
            Some("connection failed"),
            "{url}"
        );
    }
    // A receiver that answered is reported by its status.
    let receiver = Receiver::start().await;
    receiver.plan([Answer::Status(403), Answer::After(Duration::from_secs(2))]);
    let answered = settled_delivery(&engine, &receiver.url).await;
    assert_eq!(
        answered.last_error.as_deref(),
        Some("the receiver answered HTTP 403")
    );
    let silent = settled_delivery(&engine, &receiver.url).await;
    assert_eq!(
        silent.last_error.as_deref(),
        Some("timed out: no answer within 300 ms")
    );
}
