//! Property tests of the output decoder: however a pipe splits the bytes, the text is
//! the same.

use gsv_node::sessions::buffer::{TextBuffer, Utf8Decoder};
use proptest::prelude::*;

/// Decodes `bytes` delivered in chunks that end at `cuts` (sorted offsets).
fn decode_in_chunks(bytes: &[u8], cuts: &[usize]) -> String {
    let mut decoder = Utf8Decoder::default();
    let mut out = String::new();
    let mut start = 0;
    for &cut in cuts {
        decoder.decode(&bytes[start..cut], &mut out);
        start = cut;
    }
    decoder.decode(&bytes[start..], &mut out);
    decoder.finish(&mut out);
    out
}

/// Arbitrary numbers turned into sorted cut points within `0..=len`.
fn cut_points(mut cuts: Vec<usize>, len: usize) -> Vec<usize> {
    for c in &mut cuts {
        *c %= len + 1;
    }
    cuts.sort_unstable();
    cuts
}

proptest! {
    #[test]
    fn any_chunking_of_multibyte_text_decodes_to_the_same_string(
        text in "(\\PC|[é€😀中\u{10FFFF}\n])*",
        cuts in proptest::collection::vec(any::<usize>(), 0..40),
    ) {
        let cuts = cut_points(cuts, text.len());
        prop_assert_eq!(decode_in_chunks(text.as_bytes(), &cuts), text);
    }

    #[test]
    fn any_chunking_of_any_bytes_decodes_like_from_utf8_lossy(
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
        cuts in proptest::collection::vec(any::<usize>(), 0..40),
    ) {
        let cuts = cut_points(cuts, bytes.len());
        let expected = String::from_utf8_lossy(&bytes).into_owned();
        prop_assert_eq!(decode_in_chunks(&bytes, &cuts), expected);
    }

    #[test]
    fn a_capped_buffer_keeps_exactly_the_last_characters(
        pieces in proptest::collection::vec("(\\PC|[é😀\n])*", 0..20),
        cap in 1usize..50,
    ) {
        let mut buffer = TextBuffer::new(cap);
        let mut all = String::new();
        for piece in &pieces {
            buffer.push_str(piece);
            all.push_str(piece);
        }
        let chars: Vec<char> = all.chars().collect();
        let expected: String = chars[chars.len().saturating_sub(cap)..].iter().collect();
        prop_assert_eq!(buffer.as_str(), expected.as_str());
        prop_assert_eq!(buffer.total_chars(), chars.len() as u64);
        prop_assert_eq!(buffer.truncated(), chars.len() > cap);
    }
}
