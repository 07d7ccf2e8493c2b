//! What travels on a link between two replicas: the opening (a challenge answered with
//! an HMAC of the accepting replica's link secret), then forwarded calls one way and
//! their progress, holder words and answers the other, each a JSON text frame.

use crate::cluster::call_book::{Answer, Forwarded, Holder};
use gsv_protocol::event::CallProgress;
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

/// The accepting replica's first frame.
#[derive(Debug, Serialize, Deserialize)]
pub struct Challenge {
    pub challenge: String,
}

/// The dialling replica's answer: who it is, and the proof that it knows the secret
/// the accepting replica gave the cluster.
#[derive(Debug, Serialize, Deserialize)]
pub struct Proof {
    pub replica: String,
    pub proof: String,
}

/// The accepting replica's word that the link is open.
#[derive(Debug, Serialize, Deserialize)]
pub struct Welcome {
    pub replica: String,
}

/// One message on an open link.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LinkMsg {
    /// A forwarded call (dialling → accepting replica).
    Call { key: String, call: Forwarded },
    /// The answer to the call `key` (accepting → dialling).
    Answer { key: String, answer: Answer },
    /// A progress event of the call `key`.
    Progress { key: String, progress: CallProgress },
    /// The holder's word on the call `key` (a call sent with an approval got there).
    Holder { key: String, holder: Holder },
}

/// The proof for `challenge` by replica `replica` under `secret`.
pub fn proof(secret: &[u8], challenge: &str, replica: &str) -> String {
    crate::webhook::signature(
        secret,
        format!("gsv-link\n{challenge}\n{replica}").as_bytes(),
    )
}

/// Whether `given` is the proof for `challenge` by `replica` (compared in constant
/// time).
pub fn proven(secret: &[u8], challenge: &str, replica: &str, given: &str) -> bool {
    let want = proof(secret, challenge, replica);
    !want.is_empty() && want.as_bytes().ct_eq(given.as_bytes()).into()
}

/// A fresh random value as hex (challenges, secrets).
pub fn random_hex() -> String {
    use rand::RngExt;
    let bytes: [u8; 32] = rand::rng().random();
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_holds_for_its_secret_challenge_and_name_only() {
        let secret = random_hex();
        let challenge = random_hex();
        let p = proof(secret.as_bytes(), &challenge, "gw-a");
        assert!(proven(secret.as_bytes(), &challenge, "gw-a", &p));
        assert!(!proven(b"another secret", &challenge, "gw-a", &p));
        assert!(!proven(secret.as_bytes(), &random_hex(), "gw-a", &p));
        assert!(!proven(secret.as_bytes(), &challenge, "gw-b", &p));
        assert!(!proven(secret.as_bytes(), &challenge, "gw-a", ""));
        assert!(!proven(secret.as_bytes(), &challenge, "gw-a", &p[..10]));
    }

    #[test]
    fn messages_with_a_raw_result_survive_the_trip() {
        let raw = serde_json::value::RawValue::from_string(
            r#"{"content":[{"type":"text","text":"hi"}]}"#.into(),
        )
        .expect("raw");
        let m = LinkMsg::Answer {
            key: "k1".into(),
            answer: Answer::Ok {
                result: raw,
                progress: 2,
                audited: true,
            },
        };
        let text = serde_json::to_string(&m).expect("encode");
        match serde_json::from_str::<LinkMsg>(&text).expect("decode") {
            LinkMsg::Answer {
                key,
                answer:
                    Answer::Ok {
                        result,
                        progress,
                        audited,
                    },
            } => {
                assert_eq!((key.as_str(), progress, audited), ("k1", 2, true));
                assert!(result.get().contains("hi"));
            }
            other => panic!("unexpected {other:?}"),
        }
        // An answer from a holder that does not say it audited the call.
        let older = r#"{"answer":{"key":"k2","answer":{"err":{"error":{"code":"timeout","message":"late"},"progress":0}}}}"#;
        match serde_json::from_str::<LinkMsg>(older).expect("decode") {
            LinkMsg::Answer {
                answer: Answer::Err { audited, .. },
                ..
            } => assert!(!audited),
            other => panic!("unexpected {other:?}"),
        }
    }
}
