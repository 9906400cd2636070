//! Feeds arbitrary bytes to the model providers' SSE decoder. Properties: it never panics, and
//! it does not depend on how the network cut the body: the body pushed whole and pushed in
//! pieces (of a size the first byte picks, 1 to 16) give the same events, or both fail.
#![no_main]

use bdk_model::ModelError;
use bdk_model::http::sse::{SseEvent, SseParser};
use libfuzzer_sys::fuzz_target;

fn decode(body: &[u8], piece: usize) -> Result<Vec<SseEvent>, ModelError> {
    let mut parser = SseParser::default();
    let mut out = Vec::new();
    for chunk in body.chunks(piece.max(1)) {
        parser.push(chunk, &mut out)?;
    }
    parser.finish(&mut out)?;
    Ok(out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else { return };
    let whole = decode(body, body.len());
    let pieces = decode(body, usize::from(selector % 16) + 1);
    match (&whole, &pieces) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "chunking changed the events"),
        (Err(_), Err(_)) => {}
        _ => panic!("one chunking failed and the other did not: {whole:?} vs {pieces:?}"),
    }
});
