// Goal: a file sent to a conversation reaches a member as a message, whose node fetches the encrypted chunks from
// whichever peer holds them, rejects corrupted ones, and saves exactly the file that was sent. Method: real
// NodeCores (handshake, channel, sync, store) wired by in-process pipes with virtual time (PipeNetwork), and a
// relay whose stored copy of one chunk is damaged.
import Foundation
import NatterCrypto
import NatterModel
import NatterStore
import Testing

@testable import NatterNode

private func fileEvents(_ net: PipeNetwork, node: Int) -> [FileEvent] {
    net.events.compactMap { $0.node == node ? { if case .file(let e) = $0.event { e } else { nil } }($0) : nil }
}

/// A group of `members` founded by `founder`, with the genesis delivered.
private func group(_ net: PipeNetwork, _ founder: NodeCore, _ members: [NodeCore]) throws -> ConversationID {
    let id = try founder.conversations.createGroup(
        title: "Files", members: members.map(\.identity.author), now: 10)
    net.perform(net.index(founder), founder.published(try founder.store.appliedRecords(of: id), now: net.now))
    net.run()
    return id
}

/// Alice and Bob linked, in a group Alice founded, and `size` random bytes Alice sent there as a file.
private func sentFile(seed: UInt64, size: Int) throws
    -> (PipeNetwork, NodeCore, NodeCore, ConversationID, Record, [UInt8])
{
    let net = PipeNetwork()
    let alice = try net.add("Alice", seed: seed)
    let bob = try net.add("Bob", seed: seed + 1)
    net.connect(alice, bob)
    net.run()
    let chat = try group(net, alice, [bob])
    var random = SeededGenerator(seed: seed + 2)
    let data = random.bytes(size)
    let record = try alice.conversations.sendFile(
        data, name: "photo.raw", mediaType: "image/x-raw", in: chat, now: 20)
    net.publish(alice, record)
    return (net, alice, bob, chat, record, data)
}

private func temporaryDirectory() throws -> String {
    let path = NSTemporaryDirectory() + "natter-files-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

@Suite("File transfer between node cores")
struct FileTransferCoreTests {
    @Test("a member fetches a file from the sender, verifies it and saves it; nothing is overwritten unasked")
    func fetchAndSave() throws {
        let size = 3 * FileLimits.chunkBytesDefault + 1234
        let (net, alice, bob, chat, record, data) = try sentFile(seed: 31, size: size)
        // Bob sees the message with name, type and size, and holds none of the content yet.
        let row = try #require(try bob.conversations.history(chat).last)
        #expect(row.id == record.id && row.text == "")
        let summary = FileSummary(name: "photo.raw", mediaType: "image/x-raw", size: UInt64(data.count), chunkCount: 4)
        #expect(row.file == summary)
        #expect(try bob.conversations.fileStatus(of: record.id, in: chat)?.heldBytes == 0)
        #expect(try bob.store.chunkUsage().count == 0, "chunks never travel with the records")
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(throws: FileError.incomplete(heldBytes: 0, size: UInt64(data.count))) {
            try bob.conversations.saveFile(record.id, in: chat, to: directory + "/early", overwrite: false)
        }
        net.perform(1, try bob.fetchFile(record.id, in: chat, now: net.now))
        net.run()
        let events = fileEvents(net, node: 1)
        #expect(events.first == .progress(record.id, bytes: 0, total: UInt64(data.count)))
        #expect(events.last == .completed(record.id))
        #expect(events.filter { if case .progress = $0 { true } else { false } }.count == 5)
        #expect(try bob.conversations.fileStatus(of: record.id, in: chat)?.isComplete == true)
        let path = directory + "/photo.raw"
        try bob.conversations.saveFile(record.id, in: chat, to: path, overwrite: false)
        let saved = try #require(FileManager.default.contents(atPath: path))
        #expect(Blake2b.hash([UInt8](saved), outputBytes: 32) == Blake2b.hash(data, outputBytes: 32))
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int == 0o600)
        // No overwrite unless told; a directory is not a file path; nothing else was written in the directory.
        #expect(FileManager.default.createFile(atPath: path, contents: Data("mine".utf8)))
        #expect(throws: FileError.destinationExists(path: path)) {
            try bob.conversations.saveFile(record.id, in: chat, to: path, overwrite: false)
        }
        #expect(FileManager.default.contents(atPath: path) == Data("mine".utf8))
        #expect(throws: FileError.destinationIsDirectory(path: directory)) {
            try bob.conversations.saveFile(record.id, in: chat, to: directory, overwrite: true)
        }
        try bob.conversations.saveFile(record.id, in: chat, to: path, overwrite: true)
        #expect(FileManager.default.contents(atPath: path).map { [UInt8]($0) } == data)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["photo.raw"])
        // Dropping the chunks keeps the message; the file can be fetched again.
        #expect(try bob.conversations.dropFile(record.id, in: chat) == 4)
        #expect(try bob.conversations.fileStatus(of: record.id, in: chat)?.heldBytes == 0)
        #expect(try bob.conversations.history(chat).last?.file != nil)
        // The same content digests on both sides: the file message is shared state.
        #expect(
            try alice.conversations.snapshot(of: chat).state.digest()
                == bob.conversations.snapshot(of: chat).state.digest())
    }

    @Test("a relay that serves a damaged chunk is caught; the chunk is fetched again from the sender")
    func tamperedChunkIsRefetched() throws {
        let net = PipeNetwork()
        let alice = try net.add("Alice", seed: 41)
        let relay = try net.add("Relay", seed: 42)
        let bob = try net.add("Bob", seed: 43)
        net.connect(alice, relay)
        net.connect(relay, bob)
        net.run()
        let chat = try group(net, alice, [bob])
        var random = SeededGenerator(seed: 44)
        let data = random.bytes(5 * FileLimits.chunkBytesDefault)
        let record = try alice.conversations.sendFile(data, name: "report.bin", in: chat, now: 20)
        net.publish(alice, record)
        let file = try #require(try alice.conversations.fileDescriptor(of: record.id, in: chat))
        #expect(try relay.conversations.fileDescriptor(of: record.id, in: chat) == nil, "the relay cannot read it")
        // The relay holds every chunk (as a node that fetched them would), chunk 2 damaged on its disk.
        var copies = [(ChunkID, [UInt8])]()
        for chunk in file.chunks { copies.append((chunk, try #require(try alice.store.chunk(chunk)))) }
        copies[2].1[100] ^= 0x40
        try relay.store.storeChunks(copies, nowMillis: 0)
        // Bob reaches only the relay at first.
        net.perform(2, try bob.fetchFile(record.id, in: chat, now: net.now))
        net.run()
        let relayID = relay.identity.author
        #expect(fileEvents(net, node: 2).contains(.chunkRejected(relayID, file.chunks[2])))
        #expect(bob.chunksRejected == 1)
        #expect(bob.fetchProgress(of: record.id)?.bytes == UInt64(4 * FileLimits.chunkBytesDefault))
        #expect(try bob.store.chunk(file.chunks[2]) == nil, "the damaged chunk was not stored")
        #expect(bob.connectedPeers[relayID] != nil, "a damaged chunk does not cost the link")
        // Before the retry interval the relay is not asked again; once Alice is linked she is asked at once.
        net.advance(.seconds(1))
        #expect(!fileEvents(net, node: 2).contains(.completed(record.id)))
        net.connect(alice, bob)
        net.run()
        #expect(fileEvents(net, node: 2).last == .completed(record.id))
        #expect(bob.chunksRejected == 1)
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try bob.conversations.saveFile(record.id, in: chat, to: directory + "/report.bin", overwrite: false)
        #expect(FileManager.default.contents(atPath: directory + "/report.bin").map { [UInt8]($0) } == data)
    }

    @Test("a fetch cut by a closed link resumes on the next link and completes")
    func cutAndResume() throws {
        let (net, alice, bob, chat, record, data) = try sentFile(seed: 51, size: 20 * FileLimits.chunkBytesDefault + 7)
        // The requests go out, then the link is closed before Alice has answered them all.
        net.perform(1, try bob.fetchFile(record.id, in: chat, now: net.now))
        net.step(12)
        let link = try #require(bob.connectedPeers[alice.identity.author])
        net.perform(1, [.close(link)])
        net.run()
        let heldAfterCut = try bob.store.chunkUsage().count
        #expect(heldAfterCut > 0 && heldAfterCut < 21, "the cut fell mid-transfer (\(heldAfterCut) chunks held)")
        #expect(bob.fetchProgress(of: record.id) != nil, "the fetch waits for a peer")
        net.connect(bob, alice)
        net.run()
        #expect(fileEvents(net, node: 1).last == .completed(record.id))
        let stored = fileEvents(net, node: 1).filter { if case .progress = $0 { true } else { false } }.count
        #expect(stored == 1 + 21, "one progress at the start and one per chunk stored")
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try bob.conversations.saveFile(record.id, in: chat, to: directory + "/big.bin", overwrite: false)
        #expect(FileManager.default.contents(atPath: directory + "/big.bin").map { [UInt8]($0) } == data)
    }

    @Test("a malformed file frame closes the link and scores the peer, like a malformed sync message")
    func malformedFrame() throws {
        let net = PipeNetwork()
        let alice = try net.add("Alice", seed: 51)
        let bob = try net.add("Bob", seed: 52)
        net.connect(alice, bob)
        net.run()
        let link = try #require(alice.connectedPeers[bob.identity.author])
        // A CHUNK_REQUEST for zero chunks.
        net.perform(0, alice.sendApplicationMessage([8, 0, 0], on: link))
        net.run()
        #expect(bob.connectedPeers[alice.identity.author] == nil)
        #expect(net.events.contains { if $0.node == 1, case .misbehaved = $0.event { true } else { false } })
    }
}
