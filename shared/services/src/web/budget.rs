//! How much one WebService answer may weigh. Behind the ALB a Lambda response holds at
//! most 1 MB of JSON, and a binary body travels base64 inside it; the edge gzip-compresses
//! large answers for browsers (`Content-Encoding`), so what must fit is the compressed
//! body. [`ResponseBudget`] is that bound; the composition root sets it where the transport
//! has one, and answers that can be shortened (a stage log) are shortened to fit, with a
//! note saying what was left out.

use std::io::Write;

use prost::Message;
use wisp_proto::model::{LogBlock, LogSeverity};
use wisp_proto::webservice::GetStageLogResponse;

/// The largest answer the transport carries, in gzip-compressed bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseBudget {
    pub max_compressed_bytes: usize,
}

/// Size of `bytes` once gzip-compressed at the fastest level: never smaller than what the
/// edge's default level produces, so an answer measured to fit here fits there.
fn gzip_len(bytes: &[u8]) -> usize {
    struct Count(usize);
    impl Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut encoder = flate2::write::GzEncoder::new(Count(0), flate2::Compression::fast());
    match encoder.write_all(bytes).and_then(|()| encoder.finish()) {
        Ok(count) => count.0,
        Err(_) => usize::MAX,
    }
}

impl ResponseBudget {
    fn fits(&self, message: &impl Message) -> bool {
        message.encoded_len() <= self.max_compressed_bytes
            || gzip_len(&message.encode_to_vec()) <= self.max_compressed_bytes
    }

    /// The whole log when it fits; else its newest blocks that fit, after a first block
    /// saying how many were left out and where the whole log is (`log_path` in the
    /// filestore). Blocks are in order, oldest first.
    pub(crate) fn fit_stage_log(
        &self,
        blocks: Vec<LogBlock>,
        completed: bool,
        log_path: &str,
    ) -> GetStageLogResponse {
        let whole = GetStageLogResponse { blocks, completed };
        if whole.blocks.is_empty() || self.fits(&whole) {
            return whole;
        }
        let blocks = whole.blocks;
        let trimmed = |kept: usize| {
            let left_out = &blocks[..blocks.len() - kept];
            let mut out = Vec::with_capacity(kept + 1);
            out.push(left_out_note(left_out, log_path));
            out.extend_from_slice(&blocks[blocks.len() - kept..]);
            GetStageLogResponse {
                blocks: out,
                completed,
            }
        };
        // The most newest blocks that fit: more blocks never compress smaller.
        let (mut lo, mut hi) = (0, blocks.len() - 1);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if self.fits(&trimmed(mid)) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        tracing::info!(
            log = log_path,
            blocks = blocks.len(),
            sent = lo,
            "stage log trimmed to fit the response budget"
        );
        trimmed(lo)
    }
}

/// The block standing in for `left_out` (not empty): at the last left-out block's place.
fn left_out_note(left_out: &[LogBlock], log_path: &str) -> LogBlock {
    let bytes: usize = left_out.iter().map(|b| b.log.len()).sum();
    let last = left_out.last().cloned().unwrap_or_default();
    LogBlock {
        index: last.index,
        log: format!(
            "[wisp] {} earlier log block(s) ({bytes} bytes) are not shown: this stage log is \
             too large to send whole through the load balancer. The whole log is the object \
             {log_path} in the control plane's filestore (its S3 bucket).",
            left_out.len()
        ),
        severity: LogSeverity::Error as i32,
        created_at: last.created_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(index: i64, log: String) -> LogBlock {
        LogBlock {
            index,
            log,
            severity: LogSeverity::Info as i32,
            created_at: 1_700_000_000 + index,
        }
    }

    /// Text that gzip cannot shrink much: a little xorshift generator.
    fn noise(seed: u64, len: usize) -> String {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b'!' + (x % 90) as u8)
            })
            .collect()
    }

    #[test]
    fn a_log_that_fits_compressed_is_sent_whole() {
        let budget = ResponseBudget {
            max_compressed_bytes: 100_000,
        };
        let blocks: Vec<_> = (0..5_000)
            .map(|i| block(i, format!("step {i}: pulling image ghcr.io/org/app:v2\n")))
            .collect();
        let raw: usize = blocks.iter().map(|b| b.log.len()).sum();
        assert!(raw > 2 * budget.max_compressed_bytes, "{raw} bytes");
        let out = budget.fit_stage_log(blocks.clone(), true, "log/d/s/0.txt");
        assert_eq!(out.blocks, blocks);
        assert!(out.completed);
    }

    #[test]
    fn a_log_too_large_keeps_its_newest_blocks_after_a_note() {
        let budget = ResponseBudget {
            max_compressed_bytes: 50_000,
        };
        let blocks: Vec<_> = (0..100)
            .map(|i| block(i, noise(i as u64 + 7, 2_000)))
            .collect();
        let out = budget.fit_stage_log(blocks.clone(), false, "log/d/s/0.txt");
        assert!(!out.completed);
        let note = &out.blocks[0];
        assert_eq!(note.severity, LogSeverity::Error as i32);
        assert!(note.log.contains("log/d/s/0.txt"), "{}", note.log);
        let kept = &out.blocks[1..];
        assert!(!kept.is_empty() && kept.len() < blocks.len());
        assert_eq!(
            kept,
            &blocks[blocks.len() - kept.len()..],
            "the newest, in order"
        );
        assert!(
            note.log
                .starts_with(&format!("[wisp] {} earlier", blocks.len() - kept.len()))
        );
        assert_eq!(note.index, blocks[blocks.len() - kept.len() - 1].index);
        assert!(gzip_len(&out.encode_to_vec()) <= budget.max_compressed_bytes);
        // As many as fit: one more block would not.
        let one_more = GetStageLogResponse {
            blocks: [&out.blocks[..1], &blocks[blocks.len() - kept.len() - 1..]].concat(),
            completed: false,
        };
        assert!(gzip_len(&one_more.encode_to_vec()) > budget.max_compressed_bytes);
    }

    #[test]
    fn one_huge_block_leaves_only_the_note() {
        let budget = ResponseBudget {
            max_compressed_bytes: 10_000,
        };
        let out = budget.fit_stage_log(vec![block(0, noise(3, 50_000))], true, "log/x");
        assert_eq!(out.blocks.len(), 1);
        assert!(
            out.blocks[0]
                .log
                .contains("1 earlier log block(s) (50000 bytes)")
        );
    }
}
