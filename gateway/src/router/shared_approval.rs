//! One human decision for a whole fan-out.
//!
//! A fan-out runs one tool with the same arguments on many nodes; asking an operator
//! once per node would bury the queue (500 nodes, 500 requests) and invite approving
//! by reflex. Instead the first node call of a fan-out that needs approval opens one
//! request that names the fan-out's selector and lists every node it will run on; the
//! other node calls wait for that same decision, and an approval releases each of them
//! (the request's id travels to every node as `tool.invoke.approval`). A refusal —
//! denied, expired, cancelled — fails every node call that needed it. The decision
//! never leaves its fan-out: the next fan-out, even an identical one, asks again.

use super::approval::{Deciders, CALLER_APPROVAL};
use super::RouteError;
use gsv_protocol::ErrorShape;
use std::future::Future;
use tokio::sync::OnceCell;

/// The decision a fan-out's node calls share.
pub struct FanoutApproval {
    /// The fan-out's selector, shown as the request's node.
    pub select: String,
    /// Every node the fan-out will call, in id order.
    pub nodes: Vec<String>,
    /// An operator's decision (node guards, and `confirm` for most tokens).
    operator: OnceCell<Result<String, ErrorShape>>,
    /// The caller's own user's or an operator's (`confirm` with `--self-confirm`).
    caller: OnceCell<Result<String, ErrorShape>>,
}

impl FanoutApproval {
    pub fn new(select: String, nodes: Vec<String>) -> Self {
        FanoutApproval {
            select,
            nodes,
            operator: OnceCell::new(),
            caller: OnceCell::new(),
        }
    }

    /// The fan-out's decision for a question `deciders` may answer: an operator's
    /// approval already given answers any question; otherwise the first asker's
    /// `ask` decides for every node call waiting on the same kind of question.
    pub(super) async fn decide<F, Fut>(
        &self,
        deciders: Deciders,
        ask: F,
    ) -> Result<String, RouteError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<String, RouteError>>,
    {
        for cell in [&self.operator, &self.caller] {
            if let Some(Ok(id)) = cell.get() {
                if id != CALLER_APPROVAL || deciders == Deciders::CallerOrOperator {
                    return Ok(id.clone());
                }
            }
        }
        let cell = match deciders {
            Deciders::Operator => &self.operator,
            Deciders::CallerOrOperator => &self.caller,
        };
        let decided = cell
            .get_or_init(|| async { ask().await.map_err(ErrorShape::from) })
            .await;
        decided.clone().map_err(RouteError::FanoutApproval)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsv_protocol::ErrorCode;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn fanout_approval_is_asked_once_for_every_node() {
        let group = FanoutApproval::new("role=web".into(), vec!["a".into(), "b".into()]);
        let asked = AtomicUsize::new(0);
        let ask = || async {
            asked.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            Ok::<_, RouteError>("req1".to_owned())
        };
        let (a, b, c) = tokio::join!(
            group.decide(Deciders::Operator, ask),
            group.decide(Deciders::Operator, ask),
            group.decide(Deciders::Operator, ask),
        );
        // An operator's yes also answers the `confirm` of a self-confirm token.
        let d = group.decide(Deciders::CallerOrOperator, ask).await;
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        for r in [a, b, c, d] {
            assert_eq!(r.ok().as_deref(), Some("req1"));
        }
    }

    #[tokio::test]
    async fn fanout_approval_refusal_fails_every_node_and_caller_yes_is_not_an_operators() {
        let group = FanoutApproval::new("*".into(), vec![]);
        let denied = group
            .decide(Deciders::Operator, || async {
                Err(RouteError::Denied {
                    approval: "r9".into(),
                })
            })
            .await;
        let again = group
            .decide(Deciders::Operator, || async { Ok("never".to_owned()) })
            .await;
        for r in [denied, again] {
            let e = ErrorShape::from(r.expect_err("refused"));
            assert_eq!(e.code, ErrorCode::Denied);
        }
        // The caller's own yes does not answer a node guard's question.
        let group = FanoutApproval::new("*".into(), vec![]);
        let mine = group
            .decide(Deciders::CallerOrOperator, || async {
                Ok(CALLER_APPROVAL.to_owned())
            })
            .await;
        assert_eq!(mine.ok().as_deref(), Some(CALLER_APPROVAL));
        let guard = group
            .decide(Deciders::Operator, || async { Ok("op1".to_owned()) })
            .await;
        assert_eq!(guard.ok().as_deref(), Some("op1"));
    }
}
