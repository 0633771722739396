// swift-tools-version: 6.1
// natter: a serverless chat node for local networks. Module map and reasons: docs/architecture.md.
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("ExistentialAny"),
]

// The release executable's idle memory (docs/performance.md, decision 0013): the Swift runtime and Foundation linked
// statically (only the code natter uses is mapped, no per-library relocations), by lld with packed relative
// relocations (DT_RELR, glibc ≥ 2.36: a 20 KiB table read at start instead of 2.4 MiB), exporting no symbols of its
// own (`--no-export-dynamic`: the toolchain's `-export-dynamic` put every symbol of natter's modules in a 1.6 MiB
// dynamic symbol table that the loader maps whole and nothing looks up). A linked idle node: 38.8 MiB RSS linked
// dynamically, about 28 so. Debug builds keep the shared runtime. XCTest and Swift Testing exist only as
// shared libraries, and test bundles link the `natter` target: a release build of the tests needs
// NATTER_SHARED_RUNTIME=1 (`NATTER_SHARED_RUNTIME=1 swift build -c release --build-tests`).
let sharedRuntime = Context.environment["NATTER_SHARED_RUNTIME"] != nil
let staticRelease = BuildSettingCondition.when(platforms: [.linux], configuration: .release)
let releaseSwiftSettings: [SwiftSetting] = sharedRuntime ? [] : [.unsafeFlags(["-static-stdlib"], staticRelease)]
let releaseLinkerSettings: [LinkerSetting] =
    sharedRuntime
    ? []
    : [
        .unsafeFlags(
            [
                "-static-stdlib", "-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                "-Xlinker", "--no-export-dynamic",
            ], staticRelease)
    ]

let package = Package(
    name: "natter",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "natter", targets: ["natter"])
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        // The node as a Service: a ServiceGroup runs it and turns SIGINT/SIGTERM into a graceful shutdown.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // Logger, which ServiceGroup takes (already a dependency of swift-service-lifecycle).
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // libsodium, the only cryptography library natter uses. Only NatterCrypto imports it.
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        // The Swift face of libsodium: identities, signatures, AEAD, sealed boxes, hashing, KDF, randomness.
        .target(name: "NatterCrypto", dependencies: ["CSodium"], swiftSettings: strictSettings),
        // Pure value types and rules: ids, the record envelope, its canonical codec, vector clocks, limits.
        .target(name: "NatterModel", dependencies: ["NatterCrypto"], swiftSettings: strictSettings),
        // Sans-IO state machines for links: the Noise XXpsk0 handshake, the secure channel and the sync session.
        .target(
            name: "NatterSync",
            dependencies: ["NatterModel", "NatterCrypto"],
            swiftSettings: strictSettings
        ),
        // The SQLite record log (GRDB): ingest, frontiers, fork evidence, own appends, digest.
        .target(
            name: "NatterStore",
            dependencies: [
                "NatterModel", "NatterCrypto", .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's C API for the one hot insert GRDB's argument boxing slowed (RecordRowInsert).
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            swiftSettings: strictSettings
        ),
        // SwiftNIO adapters: TCP connections carrying bytes, UDP discovery beacons. Knows bytes and addresses, not chat.
        .target(
            name: "NatterNetwork",
            dependencies: [
                "NatterSync", "NatterModel", "NatterCrypto",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        // The node: its deterministic core (store, conversations, one handshake/channel/sync session per link) and
        // the actor that drives it over the network with real time.
        .target(
            name: "NatterNode",
            dependencies: [
                "NatterStore", "NatterSync", "NatterModel", "NatterCrypto", "NatterNetwork",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // The node actor runs on an event-loop thread of its own (blocking SQLite work off the shared pool).
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        // The convergence lab: many node cores in one process over a simulated network with faults, checkers, metrics.
        .target(
            name: "NatterLab",
            dependencies: [
                "NatterNode", "NatterStore", "NatterSync", "NatterModel", "NatterCrypto",
                // SQL on a node's store behind its back: only the drop-record variant, a deliberately broken node.
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strictSettings
        ),
        // libedit (Debian libedit-dev), through its native el_* interface. Only NatterTerminal imports it.
        .systemLibrary(
            name: "CEditLine",
            pkgConfig: "libedit",
            providers: [.apt(["libedit-dev"])]
        ),
        // The interactive terminal: a libedit line editor on its own thread (print above the prompt, history,
        // completion, typing reports) and the terminal facts (interactive?, colours?, width).
        .target(name: "NatterTerminal", dependencies: ["CEditLine"], swiftSettings: strictSettings),
        // The line interface (SPEC "REPL"): commands parsed into a table of small command types, a session that sends
        // intents to the node and renders the events it emits (for people, or JSON lines for scripts), consoles.
        .target(
            name: "NatterREPL",
            dependencies: [
                "NatterNode", "NatterStore", "NatterModel", "NatterCrypto", "NatterSync", "NatterTerminal",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSettings
        ),
        // The benchmarks (`natter bench`): the machine's limits, catch-up, send latency, throughput, queries, search,
        // and their reports — in a library, so the executable keeps only their options.
        .target(
            name: "NatterBench",
            dependencies: ["NatterNode", "NatterStore", "NatterModel", "NatterCrypto", "NatterSync", "NatterNetwork"],
            swiftSettings: strictSettings
        ),
        // Hostile peers and probes (`natter debug attack|flood|write-loop|append-loop`): a raw link spoken by hand, the
        // attacks of issue 19, the flooding node, the crash tests' writers — in a library, so tests link them too.
        .target(
            name: "NatterProbe",
            dependencies: ["NatterNode", "NatterStore", "NatterModel", "NatterCrypto", "NatterSync", "NatterNetwork"],
            swiftSettings: strictSettings
        ),
        // A tiny program around LineEditor that the pseudo-terminal test drives through tmux.
        .executableTarget(
            name: "natter-terminal-demo",
            dependencies: ["NatterTerminal"],
            path: "Sources/natter-terminal-demo",
            swiftSettings: strictSettings
        ),
        // The executable: command-line parsing and nothing else of substance.
        .executableTarget(
            name: "natter",
            dependencies: [
                "NatterStore", "NatterModel", "NatterCrypto", "NatterNode", "NatterNetwork", "NatterLab",
                "NatterTerminal", "NatterSync", "NatterREPL", "NatterBench", "NatterProbe",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            // Compiled with -static-stdlib too: its objects then name the static Foundation's libraries (ICU,
            // CoreFoundation…) for the linker, as `swift build --static-swift-stdlib` would.
            swiftSettings: strictSettings + releaseSwiftSettings,
            linkerSettings: releaseLinkerSettings
        ),
        // libFuzzer targets for every decoder of network bytes, one chosen by NATTER_FUZZ_TARGET (scripts/fuzz.sh);
        // built without -DFUZZING it replays corpora (Tests/Fuzz/TARGET).
        .executableTarget(
            name: "natter-fuzz",
            dependencies: ["NatterModel", "NatterCrypto", "NatterSync", "NatterNetwork"],
            path: "Sources/natter-fuzz",
            swiftSettings: strictSettings
        ),
        // Test support shared by test targets: a tmux-driven pseudo-terminal, bounded waits, child processes.
        .target(
            name: "NatterTestSupport", path: "Tests/Support/NatterTestSupport",
            swiftSettings: strictSettings),
        // Test support: a SQLite VFS that drops every write not yet fsynced when a power cut is simulated.
        .target(name: "CPowerCutVFS", linkerSettings: [.linkedLibrary("sqlite3")]),
        .testTarget(
            name: "NatterNodeTests",
            dependencies: [
                "NatterNode", "NatterStore", "NatterSync", "NatterModel", "NatterCrypto", "NatterNetwork", "natter",
                "NatterREPL", "NatterProbe", "NatterTestSupport",
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "NatterNetworkTests",
            dependencies: ["NatterNetwork", "NatterModel", "NatterCrypto"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "NatterLabTests",
            dependencies: [
                "NatterLab", "NatterNode", "NatterStore", "NatterModel", "NatterCrypto", "natter", "NatterTestSupport",
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "NatterTerminalTests",
            dependencies: ["NatterTerminal", "natter-terminal-demo", "NatterTestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(name: "NatterCryptoTests", dependencies: ["NatterCrypto"], swiftSettings: strictSettings),
        .testTarget(
            name: "NatterModelTests",
            dependencies: ["NatterModel", "NatterCrypto"],
            resources: [],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "NatterSyncTests",
            dependencies: ["NatterSync", "NatterModel", "NatterCrypto"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "NatterStoreTests",
            dependencies: [
                "NatterStore", "NatterModel", "NatterCrypto", "natter", "CPowerCutVFS", "NatterTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
