// The sync message decoder (docs/protocol.md §3.2, types 1–7 and 11–15: SUMMARY … PING, PRUNE, LEAVING, REROUTE,
// PRIORITY RECORDS, PRIORITY CREDIT), fuzzed with the same input as the record decoder: no input may crash it, and
// whatever it accepts re-encodes to exactly the input (one encoding per message). The seeds
// `Tests/Fuzz/record-corpus/sync-prune.bin`, `sync-reroute.bin`, `sync-leaving.bin`, `sync-priority-records.bin` and
// `sync-priority-credit.bin` are a PRUNE and a REROUTE of two feeds, a LEAVING, a PRIORITY RECORDS carrying test
// vector 1 with one batch of priority credit, and a PRIORITY CREDIT of two batches.
import NatterSync

/// Runs `bytes` through the sync message decoder; traps if what it accepts re-encodes differently.
func fuzzSyncDecoder(_ bytes: [UInt8]) {
    if SyncMessageFuzzing.reencodes(bytes) == false { fatalError("natter-fuzz: a sync message re-encodes differently") }
}
