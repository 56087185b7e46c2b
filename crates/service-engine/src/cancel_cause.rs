//! Why the engine cancels a run: recorded on the run as its `cancel_reason`, worded as
//! the Python peer words it, so clients that read it see the same text from either.

use service_types::{CancelAction, MultitaskStrategy};
use uuid::Uuid;

/// What cancelled a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CancelCause {
    /// `POST /threads/{thread_id}/runs/{run_id}/cancel` (A2A's `tasks/cancel` too, as
    /// the peer's goes through that route).
    Requested(CancelAction),
    /// `POST /runs/cancel`.
    RequestedInBulk(CancelAction),
    /// A newer run on its thread displaced it by its multitask strategy.
    Superseded {
        by: Uuid,
        strategy: MultitaskStrategy,
    },
    /// The client that started or joined it went away (`on_disconnect: cancel`).
    Disconnected,
    /// The run was deleted while active.
    RunDeleted,
    /// Its thread was deleted (by a client or its ttl) while the run was active.
    ThreadDeleted(Uuid),
}

impl CancelCause {
    /// The `cancel_reason` text. Paths keep their literal `{placeholders}`, as the
    /// peer's do.
    pub(crate) fn reason(self) -> String {
        match self {
            Self::Requested(action) => format!(
                "{} requested via POST /threads/{{thread_id}}/runs/{{run_id}}/cancel",
                action_name(action)
            ),
            Self::RequestedInBulk(action) => {
                format!("{} requested via POST /runs/cancel", action_name(action))
            }
            Self::Superseded { by, strategy } => format!(
                "superseded by run {by} (multitask_strategy={})",
                strategy_name(strategy)
            ),
            Self::Disconnected => {
                "client disconnected from the run stream (on_disconnect=cancel)".to_owned()
            }
            Self::RunDeleted => {
                "run deleted via DELETE /threads/{thread_id}/runs/{run_id}".to_owned()
            }
            Self::ThreadDeleted(thread_id) => format!("thread {thread_id} was deleted"),
        }
    }
}

fn action_name(action: CancelAction) -> &'static str {
    match action {
        CancelAction::Interrupt => "interrupt",
        CancelAction::Rollback => "rollback",
    }
}

fn strategy_name(strategy: MultitaskStrategy) -> &'static str {
    match strategy {
        MultitaskStrategy::Reject => "reject",
        MultitaskStrategy::Interrupt => "interrupt",
        MultitaskStrategy::Rollback => "rollback",
        MultitaskStrategy::Enqueue => "enqueue",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_worded_as_the_peer_words_them() {
        let by = Uuid::nil();
        let cases = [
            (
                CancelCause::Requested(CancelAction::Interrupt),
                "interrupt requested via POST /threads/{thread_id}/runs/{run_id}/cancel",
            ),
            (
                CancelCause::Requested(CancelAction::Rollback),
                "rollback requested via POST /threads/{thread_id}/runs/{run_id}/cancel",
            ),
            (
                CancelCause::RequestedInBulk(CancelAction::Interrupt),
                "interrupt requested via POST /runs/cancel",
            ),
            (
                CancelCause::Superseded {
                    by,
                    strategy: MultitaskStrategy::Rollback,
                },
                "superseded by run 00000000-0000-0000-0000-000000000000 (multitask_strategy=rollback)",
            ),
            (
                CancelCause::Disconnected,
                "client disconnected from the run stream (on_disconnect=cancel)",
            ),
        ];
        for (cause, text) in cases {
            assert_eq!(cause.reason(), text);
        }
    }
}
