// The corpus replayer and seed writer: what natter-fuzz is when built without `-DFUZZING` (FuzzTarget.swift).
#if !FUZZING

import Foundation

/// `natter-fuzz TARGET PATH…` replays files (or every file of directories) through one target;
/// `natter-fuzz --all DIRECTORY` replays `DIRECTORY/TARGET` for every target (each must exist);
/// `natter-fuzz --write-seeds DIRECTORY` writes the generated seeds (`SeedCorpus`) into `DIRECTORY/TARGET`.
/// Rejected inputs are the normal case and do not fail a replay; a broken property crashes it.
@main
struct CorpusReplayer {
    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        switch arguments.first {
        case "--all" where arguments.count == 2:
            for target in FuzzTarget.allCases {
                let directory = arguments[1] + "/" + target.rawValue
                guard FileManager.default.fileExists(atPath: directory) else {
                    fail("natter-fuzz: no seed corpus for \(target.rawValue) at \(directory)")
                }
                replay(target, [directory])
            }
            let known = Set(FuzzTarget.allCases.map(\.rawValue))
            let present = (try? FileManager.default.contentsOfDirectory(atPath: arguments[1])) ?? []
            for name in present.sorted() where !known.contains(name) {
                fail("natter-fuzz: \(arguments[1])/\(name) is the corpus of no target (targets: \(FuzzTarget.names))")
            }
        case "--write-seeds" where arguments.count == 2:
            for (target, seeds) in SeedCorpus.all() {
                let directory = arguments[1] + "/" + target.rawValue
                try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                for (name, bytes) in seeds {
                    require(target.run(bytes) || name.hasPrefix("rejected-"), "seed \(name) of \(target) is refused")
                    guard FileManager.default.createFile(atPath: directory + "/" + name + ".bin", contents: Data(bytes))
                    else { fail("natter-fuzz: cannot write \(directory)/\(name).bin") }
                }
                print("\(target.rawValue): \(seeds.count) seeds")
            }
        case let name? where arguments.count >= 2:
            guard let target = FuzzTarget(rawValue: name) else {
                fail("natter-fuzz: no target \(name) (targets: \(FuzzTarget.names))")
            }
            replay(target, Array(arguments.dropFirst()))
        default:
            fail(
                "usage: natter-fuzz TARGET FILE-OR-DIRECTORY… | --all DIRECTORY | --write-seeds DIRECTORY\n"
                    + "targets: \(FuzzTarget.names)")
        }
    }

    /// Replays every file of `paths` through `target` and prints one line of counts.
    private static func replay(_ target: FuzzTarget, _ paths: [String]) {
        var counts = (files: 0, accepted: 0)
        for path in paths {
            for file in files(at: path) {
                guard let data = FileManager.default.contents(atPath: file) else { fail("natter-fuzz: cannot read \(file)") }
                counts.files += 1
                if target.run(Array(data)) { counts.accepted += 1 }
            }
        }
        print("\(target.rawValue): replayed \(counts.files) inputs, \(counts.accepted) accepted by the decoder")
    }

    /// The regular files directly in `path` (sorted, for a stable order), or `path` itself if it is a file.
    private static func files(at path: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            fail("natter-fuzz: no such file or directory: \(path)")
        }
        guard isDirectory.boolValue else { return [path] }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        return names.sorted().map { path + "/" + $0 }.filter { file in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory) && !isDirectory.boolValue
        }
    }

    private static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data((message + "\n").utf8))
        exit(2)
    }
}

#endif
