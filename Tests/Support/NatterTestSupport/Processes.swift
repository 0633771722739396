// Test support shared by test targets: child processes of the executables built beside the test bundle.
public import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The executable `name` (such as `natter`) built beside this test bundle.
public func builtExecutable(_ name: String) throws -> URL {
    let candidates = [
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(name),
        Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent(name),
        Bundle.main.bundleURL.appendingPathComponent(name),
    ]
    guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
        throw TerminalTestFailure("\(name) not found next to the test bundle: \(candidates.map(\.path))")
    }
    return found
}

/// Runs `binary` to its end with no input and returns its exit status and output. Bounded: after 120 s the child
/// is killed and this throws. The output goes to files, so a child that prints much cannot block on a full pipe.
public func runProcess(_ binary: URL, _ arguments: [String]) async throws -> (
    status: Int32, stdout: String, stderr: String
) {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("natter-process-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let outPath = directory.appendingPathComponent("stdout")
    let errPath = directory.appendingPathComponent("stderr")
    guard FileManager.default.createFile(atPath: outPath.path, contents: nil),
        FileManager.default.createFile(atPath: errPath.path, contents: nil)
    else { throw TerminalTestFailure("cannot create the output files in \(directory.path)") }
    let out = try FileHandle(forWritingTo: outPath)
    let err = try FileHandle(forWritingTo: errPath)
    defer {
        try? out.close()
        try? err.close()
    }

    let process = Process()
    process.executableURL = binary
    process.arguments = arguments
    process.standardOutput = out
    process.standardError = err
    process.standardInput = FileHandle.nullDevice
    try process.run()
    guard try await waitForExit(process, seconds: 120) else {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        throw TerminalTestFailure("\(binary.lastPathComponent) \(arguments) did not finish within 120 s")
    }
    let stdout = String(decoding: try Data(contentsOf: outPath), as: UTF8.self)
    let stderr = String(decoding: try Data(contentsOf: errPath), as: UTF8.self)
    return (process.terminationStatus, stdout, stderr)
}

/// Waits (suspending, polling every 10 ms) until `process` has exited or `seconds` pass; returns whether it exited.
/// Not `Process.waitUntilExit`, which blocks a thread of the cooperative pool the whole time (see `waitFor`).
public func waitForExit(_ process: Process, seconds: Double) async throws -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while process.isRunning {
        guard Date() < deadline else { return false }
        try await Task.sleep(for: .milliseconds(10))
    }
    return true
}
