//! What holds something of a token outside the core (the console's browser sessions):
//! told at once when the token is revoked, here or on another replica, so what it holds
//! ends with the token. The core calls them without knowing who they are.

use std::sync::{Arc, RwLock};

/// Something that holds sessions or state of tokens.
pub trait TokenHolder: Send + Sync {
    /// `token_id` was revoked: end what it holds.
    fn token_revoked(&self, token_id: &str);
}

/// Every holder of one gateway.
#[derive(Default)]
pub struct TokenHolders(RwLock<Vec<Arc<dyn TokenHolder>>>);

impl TokenHolders {
    /// `holder` hears of every revocation from now on.
    pub fn add(&self, holder: Arc<dyn TokenHolder>) {
        self.0
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(holder);
    }

    /// Tells every holder that `token_id` was revoked.
    pub fn revoked(&self, token_id: &str) {
        for holder in self.0.read().unwrap_or_else(|p| p.into_inner()).iter() {
            holder.token_revoked(token_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{TokenHolder, TokenHolders};
    use std::sync::{Arc, Mutex};

    #[derive(Default)]
    struct Seen(Mutex<Vec<String>>);

    impl TokenHolder for Seen {
        fn token_revoked(&self, token_id: &str) {
            self.0
                .lock()
                .expect("not poisoned")
                .push(token_id.to_owned());
        }
    }

    #[test]
    fn every_holder_hears_of_a_revocation() {
        let holders = TokenHolders::default();
        let (a, b) = (Arc::new(Seen::default()), Arc::new(Seen::default()));
        holders.revoked("before");
        holders.add(a.clone());
        holders.add(b.clone());
        holders.revoked("t1");
        for seen in [a, b] {
            assert_eq!(*seen.0.lock().expect("not poisoned"), ["t1"]);
        }
    }
}
