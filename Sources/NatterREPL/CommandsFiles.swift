import Foundation
import NatterModel
import NatterNode
import NatterStore

/// Commands about files (SPEC F13) — /send-file, /save — and /wait (SPEC F22).
extension ReplSession {
    func sendFile(_ path: String) async throws {
        let conversation: ConversationID
        switch navigation.current {
        case .none: throw ReplError("no conversation open: /open NAME first")
        case .direct(let person):
            throw ReplError("say something to \(names.display(person)) first: the conversation starts with a message")
        case .conversation(let id): conversation = id
        }
        let expanded = (path as NSString).expandingTildeInPath
        let name = URL(fileURLWithPath: expanded).lastPathComponent
        do {
            let id = try await node.sendFile(atPath: expanded, name: name, in: conversation)
            navigation.lastOwn = (conversation, id)
        } catch let error as FileError {
            throw ReplError(error.description)
        }
    }

    /// Saves a file message to `path` (into it under the file's own name when it is a directory): at once when
    /// every chunk is here, else once the fetch this starts completes.
    func save(_ ref: String, to path: String, overwrite: Bool) async throws {
        let (conversation, message) = try await resolveRef(ref)
        guard let status = try await node.read({ try $0.fileStatus(of: message, in: conversation) }) else {
            throw ReplError("\(ref) is not a file")
        }
        var target = (path as NSString).expandingTildeInPath
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: target, isDirectory: &isDirectory), isDirectory.boolValue {
            target = (target as NSString).appendingPathComponent(Self.safeFileName(status.summary.name))
        }
        let pending = FileSaves.Pending(conversation: conversation, path: target, overwrite: overwrite, ref: ref)
        if status.isComplete { return try await finishSave(message, pending) }
        do {
            try await node.fetchFile(message, in: conversation)
        } catch let error as FileError {
            throw ReplError(error.description)
        }
        saves.waitFor(message, pending)
        say(
            "fetching \(Safe.line(status.summary.name)) (\(Renderer.byteCount(status.summary.size))) from peers; "
                + "it is saved to \(Safe.line(target)) when complete")
    }

    private func finishSave(_ message: RecordID, _ pending: FileSaves.Pending) async throws {
        do {
            try await node.saveFile(message, in: pending.conversation, to: pending.path, overwrite: pending.overwrite)
        } catch let error as FileError {
            throw ReplError(error.description)
        }
        saves.saved(message)
        say("saved \(pending.ref) to \(Safe.line(pending.path))")
        output.emit(
            .object([
                ("type", "file"), ("state", "saved"), ("conversation", .string(pending.conversation.hex)),
                ("id", .string(message.hex)), ("ref", .string(pending.ref)), ("path", .string(pending.path)),
            ]))
    }

    func fileEvent(_ event: FileEvent) async {
        switch event {
        case .progress(let message, let bytes, let total):
            guard let pending = saves.pending(message) else { return }
            output.emit(
                .object([
                    ("type", "file"), ("state", "fetching"), ("conversation", .string(pending.conversation.hex)),
                    ("id", .string(message.hex)), ("ref", .string(pending.ref)), ("bytes", .int(Int64(bytes))),
                    ("total", .int(Int64(total))),
                ]))
        case .completed(let message):
            guard let pending = saves.take(message) else { return }
            do {
                try await finishSave(message, pending)
            } catch {
                report("cannot save \(pending.ref): \(error)")
            }
        case .chunkRejected(let peer, _):
            notice("\(names.display(peer)) sent a damaged file chunk; fetching it again")
        }
    }

    /// A file name from the network made safe as one path component: no separators, no control characters, no
    /// leading dots (never a hidden or parent entry).
    static func safeFileName(_ name: String) -> String {
        let cleaned = String(
            String.UnicodeScalarView(
                name.unicodeScalars.map { scalar in
                    scalar == "/" || scalar == "\\" || scalar.properties.generalCategory == .control
                        || scalar.properties.generalCategory == .format ? "_" : scalar
                }))
        let trimmed = String(cleaned.drop { $0 == "." || $0 == " " })
        return trimmed.isEmpty ? "file" : String(trimmed.prefix(200))
    }

    // MARK: - Waiting

    /// `/wait synced|delivered REF|read REF|saved REF|peer NAME|known NAME [SECONDS]`: blocks until the condition
    /// holds, or fails after the timeout, so scripts never sleep and guess.
    func wait(_ condition: String, _ arguments: [String]) async throws {
        var rest = arguments
        var seconds = 10.0
        if let last = rest.last, let number = Double(last), rest.count > (condition == "synced" ? 0 : 1) {
            seconds = number
            rest.removeLast()
        }
        let usage = "/wait synced|delivered REF|read REF|saved REF|peer NAME|known NAME [SECONDS]"
        let check: () async throws -> Bool
        switch condition {
        case "synced":
            guard rest.isEmpty else { throw ReplError("usage: \(usage)") }
            check = {
                let peers = await self.node.connectedPeers
                return !peers.isEmpty && peers.allSatisfy { self.presence.caughtUp.contains($0) }
            }
        case "delivered", "read":
            guard rest.count == 1 else { throw ReplError("usage: \(usage)") }
            let (id, message) = try await resolveRef(rest[0])
            _ = try await ownMessage(message, in: id)
            check = {
                let line = try await self.node.read { try $0.line(message, in: id) }
                let mark = StatusMark(line?.status, peersConnected: true)
                return mark.name == condition || (condition == "delivered" && mark.name == "read")
            }
        case "saved":
            guard rest.count == 1 else { throw ReplError("usage: \(usage)") }
            let (_, message) = try await resolveRef(rest[0])
            check = { self.saves.isSaved(message) }
        case "peer", "known":
            guard rest.count == 1 else { throw ReplError("usage: \(usage)") }
            let name = rest[0]
            check = {
                guard let person = try? self.resolvePerson(name) else { return false }  // not known yet: keep waiting
                return condition == "known" ? true : await self.node.connectedPeers.contains(person)
            }
        default:
            throw ReplError("\(Safe.line(condition)) is not a condition (usage: \(usage))")
        }
        let deadline = options.clock() + .milliseconds(Int64(seconds * 1000))
        while options.clock() < deadline {
            if try await check() { return }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw ReplError(
            "timed out after \(seconds.formatted()) s waiting for \(([condition] + arguments).joined(separator: " "))")
    }
}
