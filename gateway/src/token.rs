//! Token format: `gsv_{kind}_{id}_{secret}`.
//!
//! The public `id` finds the row (and names the token in `gsv token list/revoke`); the
//! 256-bit `secret` is stored only as its SHA-256 and compared in constant time. A plain
//! hash is right here because the secret is random and high-entropy, not a password.

use base64::Engine;
use rand::RngExt;
use sha2::{Digest, Sha256};
use std::fmt;
use subtle::ConstantTimeEq;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenKind {
    /// The gateway's own operator token (`admin.token`): everything.
    Admin,
    /// A node's credential, bound to one node id.
    Node,
    /// A one-time join token for one node id, exchanged at the node's first connect
    /// for its node credential.
    Join,
    /// An agent's token, carrying a policy.
    Agent,
    /// An operator's token, carrying a role (`approver` or `viewer`): reads the
    /// fleet, an approver also decides approvals; never runs a tool.
    Operator,
}

impl TokenKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenKind::Admin => "admin",
            TokenKind::Node => "node",
            TokenKind::Join => "join",
            TokenKind::Agent => "agent",
            TokenKind::Operator => "operator",
        }
    }

    pub fn parse(s: &str) -> Option<TokenKind> {
        match s {
            "admin" => Some(TokenKind::Admin),
            "node" => Some(TokenKind::Node),
            "join" => Some(TokenKind::Join),
            "agent" => Some(TokenKind::Agent),
            "operator" => Some(TokenKind::Operator),
            _ => None,
        }
    }
}

impl fmt::Display for TokenKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A token split into its parts. Never logged: `Debug` hides the secret.
pub struct ParsedToken<'a> {
    pub kind: TokenKind,
    pub id: &'a str,
    secret: &'a str,
}

impl fmt::Debug for ParsedToken<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ParsedToken({}, {}, <secret>)", self.kind, self.id)
    }
}

const ID_LEN: usize = 12;
const SECRET_BYTES: usize = 32;

/// Splits a presented token. `None` for anything not shaped like one of ours.
pub fn parse(token: &str) -> Option<ParsedToken<'_>> {
    let mut parts = token.trim().splitn(4, '_');
    if parts.next()? != "gsv" {
        return None;
    }
    let kind = TokenKind::parse(parts.next()?)?;
    let id = parts.next()?;
    let secret = parts.next()?;
    let id_ok = id.len() == ID_LEN && id.bytes().all(|b| b.is_ascii_hexdigit());
    let secret_ok = !secret.is_empty() && secret.len() <= 64;
    (id_ok && secret_ok).then_some(ParsedToken { kind, id, secret })
}

impl ParsedToken<'_> {
    /// SHA-256 of the secret part, as stored.
    pub fn secret_hash(&self) -> [u8; 32] {
        hash_secret(self.secret)
    }

    /// Constant-time comparison against a stored hash.
    pub fn matches(&self, stored: &[u8]) -> bool {
        stored.len() == 32 && bool::from(self.secret_hash().ct_eq(stored))
    }
}

fn hash_secret(secret: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(secret.as_bytes());
    h.finalize().into()
}

/// A newly minted token: the full string (shown once) and what is stored.
pub struct NewToken {
    pub token: String,
    pub id: String,
    pub hash: [u8; 32],
}

/// Mints a random token of the given kind.
pub fn generate(kind: TokenKind) -> NewToken {
    let mut rng = rand::rng();
    let id_bytes: [u8; ID_LEN / 2] = rng.random();
    let id = hex::encode(id_bytes);
    let secret_bytes: [u8; SECRET_BYTES] = rng.random();
    let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret_bytes);
    let hash = hash_secret(&secret);
    NewToken {
        token: format!("gsv_{}_{}_{}", kind.as_str(), id, secret),
        id,
        hash,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_parse_and_match() {
        for kind in [
            TokenKind::Admin,
            TokenKind::Node,
            TokenKind::Join,
            TokenKind::Agent,
            TokenKind::Operator,
        ] {
            let t = generate(kind);
            let p = parse(&t.token).expect("parses");
            assert_eq!(p.kind, kind);
            assert_eq!(p.id, t.id);
            assert!(p.matches(&t.hash));
            let other = generate(kind);
            assert!(!p.matches(&other.hash));
        }
    }

    #[test]
    fn garbage_does_not_parse() {
        for bad in [
            "",
            "gsv",
            "gsv_node",
            "gsv_root_0123456789ab_x",
            "gsv_node_xyz_secret",
            "gsv_node_0123456789ab_",
            "tok_node_0123456789ab_secret",
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn debug_hides_the_secret() {
        let t = generate(TokenKind::Agent);
        let p = parse(&t.token).unwrap();
        let secret = t.token.rsplit_once('_').map(|(_, s)| s.to_owned()).unwrap();
        assert!(!format!("{p:?}").contains(&secret));
    }
}
