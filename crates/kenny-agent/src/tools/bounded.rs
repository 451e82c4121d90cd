//! Keeps tool output and work bounded: capped byte buffers, lossy text, blocking work with a deadline.

// Convention: every result that may have been cut short carries an explicit
// `"truncated": true|false` field, so a caller never has to guess from the size.

use std::any::Any;
use std::time::Duration;

use kenny_proto::error::ErrorCode;

use super::ToolError;

/// Keeps the first (or, with [`BoundedBuf::tail`], the last) `cap` bytes of a stream and
/// remembers whether anything was dropped.
///
/// Bytes past the cap are counted and discarded rather than refused, so the writer on the
/// other end of a pipe is never blocked by us.
#[derive(Debug)]
pub(super) struct BoundedBuf {
    buf: Vec<u8>,
    cap: usize,
    seen: u64,
    keep_tail: bool,
}

impl BoundedBuf {
    pub(super) fn new(cap: usize) -> Self {
        BoundedBuf {
            buf: Vec::new(),
            cap,
            seen: 0,
            keep_tail: false,
        }
    }

    /// Keeps the end of the stream instead: where installers and package managers put
    /// the outcome and the error that explains it.
    pub(super) fn tail(cap: usize) -> Self {
        BoundedBuf {
            keep_tail: true,
            ..Self::new(cap)
        }
    }

    pub(super) fn push(&mut self, chunk: &[u8]) {
        self.seen = self.seen.saturating_add(chunk.len() as u64);
        if self.keep_tail {
            self.buf.extend_from_slice(chunk);
            // Trimming only past twice the cap keeps the copying amortised.
            if self.buf.len() > self.cap.saturating_mul(2) {
                self.buf.drain(..self.buf.len() - self.cap);
            }
        } else {
            let room = self.cap.saturating_sub(self.buf.len());
            self.buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        }
    }

    fn kept(&self) -> &[u8] {
        &self.buf[self.buf.len().saturating_sub(self.cap)..]
    }

    pub(super) fn truncated(&self) -> bool {
        self.seen > self.kept().len() as u64
    }

    /// How many bytes of the stream were dropped.
    pub(super) fn dropped(&self) -> u64 {
        self.seen - self.kept().len() as u64
    }

    #[cfg(test)]
    pub(super) fn bytes(&self) -> &[u8] {
        self.kept()
    }

    /// The kept bytes as text; see [`lossy_text`]. A tail starts with whole characters.
    pub(super) fn into_text(self) -> String {
        let cut = self.truncated();
        let kept = self.kept();
        if self.keep_tail && cut {
            let start = kept.iter().position(|b| b & 0xC0 != 0x80).unwrap_or(kept.len()).min(3);
            lossy_text(&kept[start..], false)
        } else {
            lossy_text(kept, cut)
        }
    }
}

/// Bytes to text, invalid UTF-8 replaced by U+FFFD. When `cut` says the bytes were taken
/// from the middle of a stream, a character split by the cut is dropped instead of
/// turning into a replacement character that was never in the data.
pub(super) fn lossy_text(bytes: &[u8], cut: bool) -> String {
    let keep = if cut { complete_utf8_len(bytes) } else { bytes.len() };
    String::from_utf8_lossy(&bytes[..keep]).into_owned()
}

/// Length of `bytes` without a trailing, incomplete UTF-8 sequence (if any).
pub(super) fn complete_utf8_len(bytes: &[u8]) -> usize {
    let len = bytes.len();
    // A UTF-8 sequence is at most 4 bytes, so its lead byte is among the last 4.
    for back in 1..=len.min(4) {
        let at = len - back;
        let byte = bytes[at];
        if byte & 0xC0 == 0x80 {
            continue; // continuation byte: keep looking for the lead byte
        }
        let width = match byte {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if back < width { at } else { len };
    }
    len
}

/// Runs blocking work (file walks, sysinfo reads) off the async threads.
///
/// `limit` is a backstop for work stuck in the kernel (a hung network mount): the call
/// gets a `timeout` error while the stuck thread is left behind, since it cannot be
/// interrupted. Walks should also watch their own deadline and stop early with
/// `truncated`, which is more useful than this error.
pub(super) async fn blocking<T, F>(what: &str, limit: Duration, work: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match tokio::time::timeout(limit, tokio::task::spawn_blocking(work)).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(join)) => Err(ToolError::new(
            ErrorCode::Internal,
            format!("{what} failed: {}", join_error_message(join)),
        )),
        Err(_) => Err(ToolError::new(
            ErrorCode::Timeout,
            format!("{what} did not finish within {}s", limit.as_secs()),
        )),
    }
}

/// Why a blocking task ended without a value, for a human reading the error.
pub(super) fn join_error_message(err: tokio::task::JoinError) -> String {
    if err.is_panic() {
        format!("panicked: {}", panic_text(err.into_panic()))
    } else {
        "cancelled".to_owned()
    }
}

fn panic_text(payload: Box<dyn Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(s) => (*s).to_owned(),
            Err(_) => "unknown panic".to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_cap_bytes_and_flags_the_rest() {
        let mut buf = BoundedBuf::new(5);
        buf.push(b"abc");
        assert!(!buf.truncated());
        buf.push(b"de");
        assert!(!buf.truncated(), "exactly at the cap is not truncated");
        buf.push(b"fgh");
        buf.push(b"ij");
        assert!(buf.truncated());
        assert_eq!(buf.bytes(), b"abcde");
        assert_eq!(buf.into_text(), "abcde");
    }

    #[test]
    fn a_tail_buffer_keeps_the_last_cap_bytes() {
        let mut buf = BoundedBuf::tail(5);
        buf.push(b"abc");
        assert!(!buf.truncated());
        buf.push(b"de");
        assert!(!buf.truncated(), "exactly at the cap is not truncated");
        for chunk in [&b"fgh"[..], b"ij", b"klmnopqrstuvwxyz"] {
            buf.push(chunk);
        }
        assert!(buf.truncated());
        assert_eq!(buf.dropped(), 21);
        assert_eq!(buf.bytes(), b"vwxyz");
        assert_eq!(buf.into_text(), "vwxyz");

        let mut split = BoundedBuf::tail(4);
        split.push("x€ab".as_bytes()); // the cut falls inside €: its tail bytes go
        assert_eq!(split.into_text(), "ab");
    }

    #[test]
    fn a_character_split_by_the_cap_is_dropped_not_replaced() {
        let mut buf = BoundedBuf::new(4);
        buf.push("ab€".as_bytes()); // € is 3 bytes: only 2 fit
        assert!(buf.truncated());
        assert_eq!(buf.into_text(), "ab");
    }

    #[test]
    fn invalid_utf8_inside_the_text_is_replaced() {
        assert_eq!(lossy_text(b"a\xFFb", false), "a\u{FFFD}b");
        // Not cut: a dangling lead byte at the end really is in the data.
        assert_eq!(lossy_text(b"a\xE2", false), "a\u{FFFD}");
        assert_eq!(lossy_text(b"a\xE2", true), "a");
    }

    #[test]
    fn complete_utf8_len_finds_incomplete_tails() {
        let euro = "€".as_bytes();
        assert_eq!(complete_utf8_len(b""), 0);
        assert_eq!(complete_utf8_len(b"abc"), 3);
        assert_eq!(complete_utf8_len(euro), 3);
        assert_eq!(complete_utf8_len(&euro[..2]), 0);
        assert_eq!(complete_utf8_len(&[b'x', 0xF0, 0x9F, 0x98]), 1);
        assert_eq!(complete_utf8_len("x😀".as_bytes()), 5);
        // Stray continuation bytes are invalid, not incomplete: leave them to lossy.
        assert_eq!(complete_utf8_len(&[b'x', 0x80, 0x80, 0x80, 0x80]), 5);
    }

    #[tokio::test]
    async fn blocking_reports_panics_and_timeouts() {
        let ok = blocking("adding", Duration::from_secs(5), || 2 + 2).await;
        assert_eq!(ok, Ok(4));

        let panicked = blocking("exploding", Duration::from_secs(5), || -> u8 {
            panic!("boom");
        })
        .await
        .unwrap_err();
        assert_eq!(panicked.code, ErrorCode::Internal);
        assert!(
            panicked.message.contains("exploding failed: panicked: boom"),
            "{}",
            panicked.message
        );

        let slow = blocking("sleeping", Duration::from_millis(50), || {
            std::thread::sleep(Duration::from_millis(500));
        })
        .await
        .unwrap_err();
        assert_eq!(slow.code, ErrorCode::Timeout);
    }
}
