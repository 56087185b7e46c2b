//! Inbound channel routes: Slack, Telegram, GitHub and generic signed webhooks that
//! start runs, continue conversations and send replies.
//!
//! A request to `POST /channels/{route_name}` is checked by its route's
//! [`ChannelProvider`] (the provider's own signature, not the service's
//! authentication), decoded into a message, deduplicated by the provider's event id,
//! and becomes a run (multitask strategy `enqueue`) on its conversation's thread
//! before the provider is acknowledged. The reply is the run's webhook: a
//! `channel://` destination the [`ChannelDispatcher`] sends through the provider, so
//! it is a delivery row of the outbox, durable and retried. docs/channels.md is the
//! user's guide.

mod config;
mod generic;
mod github;
mod inbound;
mod mac;
mod provider;
mod reply;
mod slack;
mod telegram;

pub use config::{ChannelsError, MAX_ALLOWED_ASSISTANTS, Route, RouteBlock, Routes};
pub use generic::Generic;
pub use github::GitHub;
pub use inbound::{Answer, Channels, InventoryEntry, channel_caller, conversation_thread};
pub use provider::{ChannelProvider, Decoded, Inbound, Message, Outgoing};
pub use reply::{ChannelDispatcher, SCHEME, reply_text};
pub use slack::Slack;
pub use telegram::{SECRET_HEADER as TELEGRAM_SECRET_HEADER, Telegram};
