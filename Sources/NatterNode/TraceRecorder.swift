import Dispatch
import NatterCrypto
public import NatterModel
import NatterStore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Where and how much a node traces (`natter run --trace FILE`).
public struct TraceOptions: Sendable {
    public var path: String
    /// The file's bound: at it the node stops recording, logs one line and runs on.
    public var bytesMax: Int

    public init(path: String, bytesMax: Int = TraceLimits.bytesDefault) {
        self.path = path
        self.bytesMax = bytesMax
    }
}

/// Records what a node's driver gives its core (NodeTrace.swift): the driver opens an entry before each call
/// (`begin`) and closes it after (`end`); the core's generator and its writer add what the call drew and wrote.
/// Entries are encoded at once and kept in a buffer that a background queue writes in batches, so the node's actor
/// never waits for the disk. Used on the node's actor only.
final class TraceRecorder {
    /// A batch is written once it holds this much, or `flushInterval` after the last one.
    static let flushBytes = 256 * 1024
    static let flushInterval: Duration = .seconds(1)
    /// Room kept for the entry that says the recorder stopped.
    private static let reserve = 64

    let path: String
    private let bytesMax: Int
    private let file: TraceFile
    /// The values the core's generator gave since the current entry began (`RecordingGenerator`).
    let draws = DrawLog()
    private var current: TraceEntry?
    private var buffer = [UInt8]()
    /// Bytes accepted so far (written or buffered).
    private var accepted = 0
    private var lastFlush: Duration = .zero
    private var stopped = false

    init(_ options: TraceOptions) throws(TraceError) {
        path = options.path
        bytesMax = options.bytesMax
        file = try TraceFile(path: options.path)
    }

    /// The core's generator: system randomness, each value noted in the current entry.
    func generator() -> RecordingGenerator { RecordingGenerator(log: draws) }

    /// Writes the header: the core is made (its draws so far are the initial ones) and the store is as it starts.
    func start(node: AuthorID, configuration: NodeConfiguration, store: RecordStore) throws {
        let records = try store.allRecords().map { RecordRef(id: $0.id, position: $0.header.position) }
        let header = TraceHeader(
            node: node, startMillis: configuration.clockOriginMillis, initialLogDigest: try store.logDigest(),
            settings: TraceSettings.settings(of: configuration), initialDraws: draws.take(), initialRecords: records)
        let bytes = TraceCodec.encode(header)
        guard bytes.count + Self.reserve <= bytesMax, bytes.count - 17 <= TraceLimits.headerBytesMax else {
            stopped = true
            draws.isOn = false
            file.close()
            throw TraceError(
                "the trace's header (\(bytes.count) bytes: \(records.count) records held) is over its bound of "
                    + "\(bytesMax) bytes; not tracing")
        }
        buffer = bytes
        accepted = bytes.count
    }

    /// A call to the core at `time` begins.
    func begin(_ call: TraceCall, at time: Duration) {
        guard !stopped else { return }
        current = TraceEntry(at: time.nanosecondsClamped, call: call, draws: draws.take())
    }

    /// The core authored (`NodeCore.writer`): kept with the current entry, records encrypted or by reference.
    func wrote(_ results: [Result<Authored, any Error>], node: AuthorID) {
        guard !stopped else { return }
        current?.writes.append(
            results.map { result in
                guard case .success(let authored) = result else { return .refused }
                return .wrote(authored.conversation, authored.records.map { Self.traced($0, node: node) })
            })
    }

    /// How a record the node wrote is kept: by reference when its payload is not encrypted (a profile names the
    /// person in clear), else its bytes.
    static func traced(_ record: Record, node: AuthorID) -> TraceRecord {
        guard record.header.conversation != ConversationID.profileFeed(of: node) else {
            return .held(RecordRef(id: record.id, position: record.header.position))
        }
        return .bytes(record.bytes)
    }

    /// The call ended at `now`: its entry joins the buffer, written when a batch is due. Returns a line to log when
    /// the recorder stopped (its bound, or a failed write).
    func end(now: Duration) -> String? {
        guard !stopped, var entry = current else { return nil }
        current = nil
        entry.draws += draws.take()
        return append(entry, now: now)
    }

    /// Notes something that is not a call (the digests as the node stops).
    func note(_ call: TraceCall, at time: Duration) -> String? {
        guard !stopped else { return nil }
        return append(TraceEntry(at: time.nanosecondsClamped, call: call), now: time)
    }

    private func append(_ entry: TraceEntry, now: Duration) -> String? {
        if let failure = file.failure { return stop(because: failure) }
        let bytes = TraceCodec.encode(entry)
        guard entry.isWithinLimits, bytes.count - 4 <= TraceLimits.entryBytesMax else {
            buffer += TraceCodec.encode(TraceEntry(at: now.nanosecondsClamped, call: .truncated))
            return stop(because: "met a call over the trace format's limits (TraceLimits)")
        }
        guard accepted + bytes.count + Self.reserve <= bytesMax else {
            buffer += TraceCodec.encode(TraceEntry(at: now.nanosecondsClamped, call: .truncated))
            return stop(because: "reached its bound of \(bytesMax) bytes")
        }
        buffer += bytes
        accepted += bytes.count
        if buffer.count >= Self.flushBytes || now - lastFlush >= Self.flushInterval {
            file.write(buffer)
            buffer = []
            lastFlush = now
        }
        return nil
    }

    private func stop(because reason: String) -> String {
        stopped = true
        draws.isOn = false
        file.write(buffer)
        buffer = []
        file.close()
        return "trace: \(path) \(reason); the node runs on without recording"
    }

    /// Writes what is buffered and closes the file, waiting for the writes (the node stops). A line to log when a
    /// write failed.
    func finish() -> String? {
        guard !stopped else {
            file.wait()  // the last batch and the entry that says why it stopped, on disk before the process ends
            return nil
        }
        stopped = true
        draws.isOn = false
        file.write(buffer)
        buffer = []
        file.close()
        file.wait()
        return file.failure.map { "trace: \(path): \($0)" }
    }
}

/// The values a `RecordingGenerator` gave, until taken.
final class DrawLog {
    private var values = [UInt64]()
    /// Off once the recorder stopped: nothing takes the values any more, so none is kept.
    var isOn = true

    func note(_ value: UInt64) { if isOn { values.append(value) } }

    func take() -> [UInt64] {
        defer { values = [] }
        return values
    }
}

/// System randomness (`SecureRandomGenerator`), each value noted for the trace.
struct RecordingGenerator: RandomNumberGenerator {
    let log: DrawLog
    private var system = SecureRandomGenerator()

    init(log: DrawLog) { self.log = log }

    mutating func next() -> UInt64 {
        let value = system.next()
        log.note(value)
        return value
    }
}

/// The trace file, written in order on a queue of its own; the first failure is kept (and nothing written after).
private final class TraceFile: Sendable {
    private let queue = DispatchQueue(label: "natter.trace")
    private let state: Mutex<(descriptor: Int32, failure: String?)>

    init(path: String) throws(TraceError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw TraceError("cannot create the trace file \(path): \(String(cString: strerror(errno)))")
        }
        state = Mutex((descriptor, nil))
    }

    var failure: String? { state.withLock { $0.failure } }

    func write(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        queue.async { [self] in
            self.state.withLock { state in
                guard state.failure == nil, state.descriptor >= 0 else { return }
                var offset = 0
                while offset < bytes.count {
                    let written = bytes[offset...].withUnsafeBytes {
                        Glibc.write(state.descriptor, $0.baseAddress, $0.count)
                    }
                    if written < 0 {
                        if errno == EINTR { continue }
                        state.failure = "cannot write the trace: \(String(cString: strerror(errno)))"
                        return
                    }
                    offset += written
                }
            }
        }
    }

    func close() {
        queue.async { [self] in
            self.state.withLock { state in
                guard state.descriptor >= 0 else { return }
                if Glibc.close(state.descriptor) != 0, state.failure == nil {
                    state.failure = "cannot close the trace: \(String(cString: strerror(errno)))"
                }
                state.descriptor = -1
            }
        }
    }

    /// Waits until every write queued so far is done.
    func wait() { queue.sync {} }
}
