//! The bytes of call arguments held in flight, budgeted per token and in all.
//!
//! Counting calls is not enough to bound the gateway's memory: a call may carry up to
//! one maximum frame (16 MiB) of arguments, held from the moment it is read until it
//! is answered (an approval wait or a Process `write` into a blocked stdin can last
//! minutes). Every routed call therefore reserves the size of its arguments here
//! first, against the caller's token share and the gateway-wide total, and gives it
//! back when it ends (the [`Reservation`] is dropped). A call over either budget is
//! refused at once with `overloaded`, naming the limit, before anything else is kept;
//! the same call fits again when the token's other calls finish.
//!
//! The token's share is [`crate::GatewayConfig::pending_bytes_per_token`] (64 MiB by
//! default) and the total [`crate::GatewayConfig::pending_bytes_max`] (256 MiB), so one
//! token filling its share leaves room for three more. A single call larger than the
//! whole share is still accepted when the token has nothing else in flight, so the
//! share never makes a legitimate maximum-size call impossible.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Why a call's arguments do not fit now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// The token already has this many bytes in flight (its share).
    #[error(
        "this token already has {held} bytes of call arguments in flight, over its share of {max}"
    )]
    TokenShare { held: usize, max: usize },
    /// The gateway already holds its total.
    #[error("the gateway already holds {max} bytes of call arguments in flight")]
    Full { max: usize },
}

impl BudgetError {
    /// The limit's stable name, for error details.
    pub fn limit(&self) -> &'static str {
        match self {
            BudgetError::TokenShare { .. } => "pending_bytes_per_token",
            BudgetError::Full { .. } => "pending_bytes",
        }
    }

    /// The limit's value in bytes.
    pub fn max(&self) -> usize {
        match self {
            BudgetError::TokenShare { max, .. } | BudgetError::Full { max } => *max,
        }
    }
}

/// Bytes in flight, by token and in all.
#[derive(Debug)]
pub struct PendingBytes {
    per_token: usize,
    max: usize,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    total: usize,
    by_token: HashMap<Arc<str>, usize>,
}

impl PendingBytes {
    /// A budget of `per_token` bytes per token and `max` in all.
    pub fn new(per_token: usize, max: usize) -> Self {
        PendingBytes {
            per_token,
            max,
            held: Mutex::new(Held::default()),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reserves `bytes` for a call of `token`, or says which budget it is over.
    pub fn reserve(&self, token: &str, bytes: usize) -> Result<Reservation<'_>, BudgetError> {
        let mut held = self.held();
        if held.total > 0 && held.total.saturating_add(bytes) > self.max {
            return Err(BudgetError::Full { max: self.max });
        }
        let key = match held.by_token.get_key_value(token) {
            Some((_, &mine)) if mine.saturating_add(bytes) > self.per_token => {
                return Err(BudgetError::TokenShare {
                    held: mine,
                    max: self.per_token,
                })
            }
            Some((k, _)) => Arc::clone(k),
            None => Arc::from(token),
        };
        *held.by_token.entry(Arc::clone(&key)).or_default() += bytes;
        held.total += bytes;
        Ok(Reservation {
            budget: self,
            token: key,
            bytes,
        })
    }

    /// Bytes `token` has in flight now.
    pub fn held_by(&self, token: &str) -> usize {
        self.held().by_token.get(token).copied().unwrap_or(0)
    }

    /// Bytes in flight now, in all.
    pub fn total(&self) -> usize {
        self.held().total
    }
}

/// Places counted one per open thing (a listen stream, an agent connection), per
/// token and in all: the bytes budget with units of one, and the names of its two
/// limits for the refusal.
#[derive(Debug)]
pub struct Places {
    count: PendingBytes,
    per_token_limit: &'static str,
    max_limit: &'static str,
}

/// No place left: which limit, and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoPlace {
    pub limit: &'static str,
    pub max: usize,
}

impl Places {
    /// `per_token` places per token and `max` in all; `limits` are the two limits'
    /// stable names (per token, in all), given in refusals.
    pub fn new(per_token: usize, max: usize, limits: (&'static str, &'static str)) -> Self {
        Places {
            count: PendingBytes::new(per_token, max),
            per_token_limit: limits.0,
            max_limit: limits.1,
        }
    }

    /// One more place for `token`, unless it holds its share or all are taken.
    pub fn open(&self, token: &str) -> Result<Reservation<'_>, NoPlace> {
        self.count.reserve(token, 1).map_err(|e| NoPlace {
            limit: match e {
                BudgetError::TokenShare { .. } => self.per_token_limit,
                BudgetError::Full { .. } => self.max_limit,
            },
            max: e.max(),
        })
    }

    /// Places `token` holds now.
    pub fn of(&self, token: &str) -> usize {
        self.count.held_by(token)
    }
}

/// Bytes held for one call; given back when dropped.
#[derive(Debug)]
pub struct Reservation<'a> {
    budget: &'a PendingBytes,
    token: Arc<str>,
    bytes: usize,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut held = self.budget.held();
        held.total = held.total.saturating_sub(self.bytes);
        if let Some(n) = held.by_token.get_mut(&self.token) {
            *n = n.saturating_sub(self.bytes);
            if *n == 0 {
                held.by_token.remove(&self.token);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_held_to_its_share_and_gets_it_back() {
        let b = PendingBytes::new(100, 1000);
        let r1 = b.reserve("a", 60).expect("fits");
        let err = b.reserve("a", 50).expect_err("over the share");
        assert_eq!(err, BudgetError::TokenShare { held: 60, max: 100 });
        assert_eq!(err.limit(), "pending_bytes_per_token");
        // Another token is not affected.
        let _r2 = b.reserve("b", 100).expect("b has its own share");
        drop(r1);
        assert_eq!(b.held_by("a"), 0);
        b.reserve("a", 100).expect("the share is back");
    }

    #[test]
    fn the_total_caps_every_token_together() {
        let b = PendingBytes::new(100, 150);
        let _a = b.reserve("a", 100).expect("fits");
        let err = b.reserve("b", 60).expect_err("over the total");
        assert_eq!(err, BudgetError::Full { max: 150 });
        assert_eq!(err.limit(), "pending_bytes");
        let _b = b.reserve("b", 50).expect("fits exactly");
        assert_eq!(b.total(), 150);
    }

    #[test]
    fn one_call_over_the_share_fits_when_nothing_else_is_held() {
        let b = PendingBytes::new(10, 20);
        let big = b.reserve("a", 64).expect("a lone large call is accepted");
        assert!(b.reserve("a", 1).is_err());
        assert!(b.reserve("b", 1).is_err(), "the total is full");
        drop(big);
        assert_eq!(b.total(), 0);
        b.reserve("b", 1).expect("room again");
    }
}
