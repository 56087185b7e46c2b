//! Resume values: which task, and which interrupt call within it, a command's
//! `resume` answers.

use std::collections::BTreeMap;

use serde_json::Value;
use service_graph::GraphError;

use crate::stored::{Loaded, RaisedInterrupt};

/// Resume values already recorded on `current`, by task position.
pub(crate) fn prior_resume(current: &Loaded) -> Vec<BTreeMap<usize, Value>> {
    current
        .task_ids()
        .iter()
        .map(|id| current.writes_of(id).resume)
        .collect()
}

/// Adds a command's `resume` to the per-task resume values. A map whose keys are all
/// pending interrupt ids resumes those interrupts; any other value resumes the one
/// pending interrupt (or the first interrupt of the first task when none is recorded).
pub(crate) fn apply_resume(
    base: &Loaded,
    value: &Value,
    resume: &mut Vec<BTreeMap<usize, Value>>,
) -> Result<(), GraphError> {
    resume.resize(base.body.next.len().max(resume.len()), BTreeMap::new());
    let pending: Vec<(usize, RaisedInterrupt)> = base
        .task_ids()
        .iter()
        .enumerate()
        .flat_map(|(position, id)| {
            let writes = base.writes_of(id);
            let open = if writes.output.is_none() {
                writes.interrupts
            } else {
                Vec::new()
            };
            open.into_iter().map(move |raised| (position, raised))
        })
        .collect();
    if let Value::Object(map) = value {
        let by_id = !map.is_empty()
            && map
                .keys()
                .all(|key| pending.iter().any(|(_, raised)| &raised.id == key));
        if by_id {
            for (position, raised) in &pending {
                if let Some(answer) = map.get(&raised.id) {
                    resume[*position].insert(raised.index, answer.clone());
                }
            }
            return Ok(());
        }
    }
    match pending.as_slice() {
        [] if !resume.is_empty() => {
            resume[0].insert(0, value.clone());
            Ok(())
        }
        [] => Ok(()),
        [(position, raised)] => {
            resume[*position].insert(raised.index, value.clone());
            Ok(())
        }
        _ => Err(GraphError::InvalidInput(
            "Several interrupts are pending: resume with a map of interrupt id to value".into(),
        )),
    }
}
