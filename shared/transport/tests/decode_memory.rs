//! The gate's estimate of what a request decodes to is at least what decoding it
//! allocates, for the shapes that cost the most per wire byte: one-byte elements of a
//! repeated string, empty and tiny elements of a repeated message, map entries, bytes
//! (issue 33: a one-byte `owner_ids` element was charged 3 bytes and decoded to ~60).
//!
//! The allocations are counted by a global allocator of this test binary (requested
//! sizes; a move counted with both blocks).

use peak_alloc::PeakAlloc;
use prost::Message;
use wisp_proto::pipedservice::{
    ReportApplicationLiveStateRequest, ReportDeploymentPlannedRequest, ReportStageLogsRequest,
    ReportStatRequest, SaveDeploymentMetadataRequest,
};
use wisp_transport::gate::decoded_size_estimate;

#[global_allocator]
static COUNTING: PeakAlloc = PeakAlloc;

fn field(number: u32, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint(&mut out, u64::from(number << 3 | 2));
    varint(&mut out, value.len() as u64);
    out.extend_from_slice(value);
    out
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn repeated(count: usize, element: impl Fn(usize) -> Vec<u8>) -> Vec<u8> {
    (0..count).flat_map(element).collect()
}

/// Most memory held while `decode` runs, beyond what was held before.
fn decode_peak(decode: impl FnOnce()) -> usize {
    let before = COUNTING.current_usage();
    COUNTING.reset_peak_usage();
    decode();
    COUNTING.peak_usage() - before
}

type Decode = fn(&[u8]);

#[test]
fn the_estimate_covers_what_decoding_allocates() {
    // Just past a power of two: the `Vec`s have just doubled, the worst case.
    const N: usize = (1 << 18) + 1;
    let live_state = |resources: Vec<u8>| field(1, &field(10, &resources));
    let shapes: Vec<(&str, Vec<u8>, Decode)> = vec![
        (
            "one-byte owner_ids of one resource",
            live_state(field(1, &repeated(N, |_| field(2, b"a")))),
            |b| drop(ReportApplicationLiveStateRequest::decode(b).unwrap()),
        ),
        (
            "empty owner_ids",
            live_state(field(1, &repeated(N, |_| field(2, b"")))),
            |b| drop(ReportApplicationLiveStateRequest::decode(b).unwrap()),
        ),
        (
            "empty resources",
            live_state(repeated(N, |_| field(1, b""))),
            |b| drop(ReportApplicationLiveStateRequest::decode(b).unwrap()),
        ),
        (
            "resources with a one-byte id",
            live_state(repeated(N, |_| field(1, &field(1, b"a")))),
            |b| drop(ReportApplicationLiveStateRequest::decode(b).unwrap()),
        ),
        ("empty stages", repeated(N, |_| field(6, b"")), |b| {
            drop(ReportDeploymentPlannedRequest::decode(b).unwrap())
        }),
        (
            "log blocks with a one-byte log",
            repeated(N, |_| field(4, &field(2, b"a"))),
            |b| drop(ReportStageLogsRequest::decode(b).unwrap()),
        ),
        (
            "distinct metadata entries",
            repeated(N, |i| {
                let key = format!("{i:x}");
                let mut entry = field(1, key.as_bytes());
                entry.extend(field(2, b"a"));
                field(2, &entry)
            }),
            |b| drop(SaveDeploymentMetadataRequest::decode(b).unwrap()),
        ),
        ("stats bytes", field(1, &vec![b'x'; 4 * 1024 * 1024]), |b| {
            drop(ReportStatRequest::decode(b).unwrap())
        }),
    ];
    for (name, bytes, decode) in shapes {
        let estimate = decoded_size_estimate(&bytes);
        let peak = decode_peak(|| decode(&bytes));
        println!(
            "{name}: {} bytes on the wire, {peak} decoding, {estimate} estimated ({:.2}x)",
            bytes.len(),
            estimate as f64 / peak as f64
        );
        // The gate holds the message's bytes beside what decoding allocates.
        assert!(
            bytes.len() + peak <= estimate,
            "{name}: decoding took {peak} bytes, estimated {estimate}"
        );
    }
}
