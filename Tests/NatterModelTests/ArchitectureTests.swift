// Goal: docs/architecture.md shows the modules as they are: its tables list every target of Package.swift with
// exactly the dependencies Package.swift gives it, its picture names every target, and no Swift file imports a
// module its target's row does not list (toolchain modules aside — and the pure modules may not import even those).
// Method: Package.swift, the document and the `import` lines of every target's Swift files, read as text.
import Foundation
import Testing

@Suite("Architecture document")
struct ArchitectureTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Modules of the toolchain, which no row lists: any target may import them, except the pure ones.
    static let toolchainModules: Set<String> = [
        "Foundation", "FoundationEssentials", "Glibc", "Musl", "Darwin", "Dispatch", "Synchronization", "Testing",
        "XCTest",
    ]
    /// Targets that never read a clock, use system randomness or do I/O: they import only what their row lists.
    static let pureTargets: Set<String> = ["NatterModel", "NatterSync"]

    static func read(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    @Test("the module tables list every target of Package.swift with exactly its dependencies")
    func tablesMatchPackage() throws {
        let targets = try PackageManifest.targets(in: Self.read("Package.swift"))
        let rows = try ArchitectureDocument(Self.read("docs/architecture.md")).rows
        // A parser that found nothing would agree with anything: this package has 25 targets.
        #expect(targets.count >= 25, "parsed \(targets.map(\.name))")
        let declared = Dictionary(targets.map { ($0.name, $0.dependencies) }, uniquingKeysWith: { $1 })
        #expect(
            Set(rows.keys) == Set(declared.keys),
            Comment(
                rawValue: "missing from docs/architecture.md: \(Set(declared.keys).subtracting(rows.keys).sorted()); "
                    + "not in Package.swift: \(Set(rows.keys).subtracting(declared.keys).sorted())"))
        for (name, dependencies) in declared.sorted(by: { $0.key < $1.key }) {
            guard let listed = rows[name] else { continue }
            #expect(
                listed == dependencies,
                Comment(
                    rawValue: "\(name): Package.swift has \(dependencies.subtracting(listed).sorted()) that the "
                        + "table lacks, the table has \(listed.subtracting(dependencies).sorted()) that Package.swift lacks"))
        }
    }

    @Test("the picture names every target")
    func pictureNamesEveryTarget() throws {
        let targets = try PackageManifest.targets(in: Self.read("Package.swift"))
        let picture = try ArchitectureDocument(Self.read("docs/architecture.md")).picture
        let words = Set(picture.split { !($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }.map(String.init))
        #expect(!picture.isEmpty)
        for target in targets { #expect(words.contains(target.name), "\(target.name) is not in the picture") }
    }

    @Test("no Swift file imports a module its target's row does not list")
    func importsAreListed() throws {
        let targets = try PackageManifest.targets(in: Self.read("Package.swift"))
        let rows = try ArchitectureDocument(Self.read("docs/architecture.md")).rows
        var importsSeen = 0
        for target in targets {
            let listed = rows[target.name] ?? []
            let allowed = Self.pureTargets.contains(target.name) ? listed : listed.union(Self.toolchainModules)
            for file in try Self.swiftFiles(under: target.directory) {
                for module in SwiftImports.modules(in: try Self.read(file)) {
                    importsSeen += 1
                    #expect(
                        allowed.contains(module),
                        "\(file) imports \(module), which the row of \(target.name) in docs/architecture.md does not list")
                }
            }
        }
        // Every target's files were found and read (a wrong path would find none and pass).
        #expect(importsSeen >= 500, "only \(importsSeen) import lines found")
    }

    @Test("the parsers read what they are meant to")
    func parsers() throws {
        let manifest = """
            let package = Package(
                name: "x", // a comment with "quotes" and targets: ["fake"]
                products: [.executable(name: "x", targets: ["A"])],
                targets: [
                    .target(name: "A", dependencies: ["B", .product(name: "NIOCore", package: "swift-nio")]),
                    /* .target(name: "Gone"), */
                    .target(name: "B", path: "Other/B"),
                    .testTarget(name: "ATests", dependencies: [.target(name: "A"), .byName(name: "B")]),
                ]
            )
            """
        let targets = try PackageManifest.targets(in: manifest)
        #expect(targets.map(\.name) == ["A", "B", "ATests"])
        #expect(targets.map(\.dependencies) == [["B", "NIOCore"], [], ["A", "B"]])
        #expect(targets.map(\.directory) == ["Sources/A", "Other/B", "Tests/ATests"])
        let delimiter = "\"\"\""  // a multi-line string's, written so that this file's own scan is not misled
        let source = """
            import Foundation
            @testable import natter
            public import struct NatterModel.AuthorID
            #if canImport(Glibc)
                internal import Glibc
            #endif
            // import Commented
            let important = "import Quoted"
            @Test("export, import elsewhere: one identity") func moved() {}
            let text = \(delimiter)
                import InAString
                \(delimiter)
            import Last // a comment
            """
        #expect(SwiftImports.modules(in: source) == ["Foundation", "natter", "NatterModel", "Glibc", "Last"])
        let document = ArchitectureDocument(
            """
            ## Modules

            ```
            A ──► B
            ```

            | target | job | imports |
            |---|---|---|
            | `A` | does a | `B`, NIOCore |
            | `B` | does b | — |

            ## Next
            | target | job | imports |
            |---|---|---|
            | `C` | not a module table: outside the section | — |
            """)
        #expect(document.rows == ["A": ["B", "NIOCore"], "B": []])
        #expect(document.picture == "A ──► B")
    }

    static func swiftFiles(under directory: String) throws -> [String] {
        let base = root.appendingPathComponent(directory)
        guard let enumerator = FileManager.default.enumerator(atPath: base.path) else { return [] }
        return enumerator.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }.sorted()
            .map { "\(directory)/\($0)" }
    }
}

/// The targets of a Package.swift, read from its text: each one's name, dependencies (targets by name and
/// products, by product name — in this package a product is named after its module) and directory.
enum PackageManifest {
    struct Target: Equatable {
        let name: String
        let dependencies: Set<String>
        let directory: String
    }

    struct Unreadable: Error, CustomStringConvertible {
        let description: String
    }

    static func targets(in text: String) throws -> [Target] {
        let code = SwiftText.withoutComments(text)
        guard let call = code.range(of: "Package(") else { throw Unreadable(description: "no Package(…)") }
        let arguments = SwiftText.elements(SwiftText.balanced(code[call.upperBound...]))
        guard let list = arguments.first(where: { $0.hasPrefix("targets:") }) else {
            throw Unreadable(description: "no targets: argument")
        }
        guard let open = list.firstIndex(of: "[") else { throw Unreadable(description: "targets: is not a list") }
        return try SwiftText.elements(SwiftText.balanced(list[list.index(after: open)...])).map(target)
    }

    static func target(_ element: Substring) throws -> Target {
        guard let kindEnd = element.firstIndex(of: "("), element.hasPrefix(".") else {
            throw Unreadable(description: "not a target: \(element)")
        }
        let kind = element[element.index(after: element.startIndex)..<kindEnd]
        let arguments = SwiftText.elements(SwiftText.balanced(element[element.index(after: kindEnd)...]))
        func string(_ label: String) -> String? {
            arguments.first { $0.hasPrefix("\(label):") }.flatMap(SwiftText.firstString)
        }
        guard let name = string("name") else { throw Unreadable(description: "a target without a name: \(element)") }
        var dependencies = Set<String>()
        if let list = arguments.first(where: { $0.hasPrefix("dependencies:") }), let open = list.firstIndex(of: "[") {
            for dependency in SwiftText.elements(SwiftText.balanced(list[list.index(after: open)...])) {
                // "Name", .target(name: "Name"), .byName(name: "Name"), .product(name: "Name", package: "p")
                guard let dependencyName = SwiftText.firstString(dependency) else {
                    throw Unreadable(description: "a dependency of \(name) without a name: \(dependency)")
                }
                dependencies.insert(dependencyName)
            }
        }
        let directory = string("path") ?? (kind == "testTarget" ? "Tests/\(name)" : "Sources/\(name)")
        return Target(name: name, dependencies: dependencies, directory: directory)
    }
}

/// Just enough of Swift's lexical structure to read a manifest: comments, string literals, bracket nesting.
enum SwiftText {
    /// `text` without `//` and `/* */` comments (string literals kept as they are).
    static func withoutComments(_ text: String) -> String {
        var result = ""
        var characters = text[...]
        var inString = false
        while let character = characters.first {
            if inString {
                result.append(character)
                characters = characters.dropFirst()
                if character == "\\", let escaped = characters.first {
                    result.append(escaped)
                    characters = characters.dropFirst()
                } else if character == "\"" {
                    inString = false
                }
            } else if characters.hasPrefix("//") {
                characters = characters.drop { $0 != "\n" }
            } else if characters.hasPrefix("/*") {
                guard let end = characters.range(of: "*/") else { return result }
                characters = characters[end.upperBound...]
            } else {
                inString = character == "\""
                result.append(character)
                characters = characters.dropFirst()
            }
        }
        return result
    }

    /// Calls `visit` with each character of `text` outside string literals and the bracket depth before it (an
    /// opening bracket raises it, a closing one lowers it), until `visit` returns false.
    static func walk(_ text: Substring, _ visit: (String.Index, Character, Int) -> Bool) {
        var depth = 0
        var inString = false
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            if inString {
                if character == "\\" { index = text.index(after: index) } else if character == "\"" { inString = false }
            } else if character == "\"" {
                inString = true
            } else {
                guard visit(index, character, depth) else { return }
                if "([{".contains(character) { depth += 1 } else if ")]}".contains(character) { depth -= 1 }
            }
            index = text.index(after: index)
        }
    }

    /// The text after an opening bracket up to its matching closing one (nesting and strings respected).
    static func balanced(_ text: Substring) -> Substring {
        var end = text.endIndex
        walk(text) { index, character, depth in
            guard depth == 0, ")]}".contains(character) else { return true }
            end = index
            return false
        }
        return text[..<end]
    }

    /// The comma-separated elements of a list or argument list at nesting depth 0, trimmed, empty ones dropped.
    static func elements(_ text: Substring) -> [Substring] {
        var result = [Substring]()
        var start = text.startIndex
        walk(text) { index, character, depth in
            if character == ",", depth == 0 {
                result.append(text[start..<index])
                start = text.index(after: index)
            }
            return true
        }
        result.append(text[start...])
        return result.map { $0.trimmingCharacters(in: .whitespacesAndNewlines)[...] }.filter { !$0.isEmpty }
    }

    /// The contents of the first string literal in `text`.
    static func firstString(_ text: Substring) -> String? {
        guard let open = text.firstIndex(of: "\"") else { return nil }
        let rest = text[text.index(after: open)...]
        return rest.firstIndex(of: "\"").map { String(rest[..<$0]) }
    }
}

/// The modules a Swift file imports: `import M`, with attributes (`@testable`), access levels (`public import`) and
/// kinds (`import struct M.T`), inside `#if` blocks too; not in comments or (multi-line) string literals.
enum SwiftImports {
    static let declaration = try! NSRegularExpression(  // a constant pattern: it compiles
        pattern: #"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?import\s+"#
            + #"(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?([A-Za-z_]\w*)(?:\.\w+)*\s*(?://.*)?$"#)

    static func modules(in source: String) -> [String] {
        let delimiter = String(repeating: "\"", count: 3)
        var inMultilineString = false
        var modules = [String]()
        for line in source.split(separator: "\n").map(String.init) {
            if line.components(separatedBy: delimiter).count % 2 == 0 {  // an odd number of delimiters opens or closes
                inMultilineString.toggle()
                continue
            }
            guard !inMultilineString else { continue }
            let range = NSRange(line.startIndex..., in: line)
            if let match = declaration.firstMatch(in: line, range: range), let module = Range(match.range(at: 1), in: line) {
                modules.append(String(line[module]))
            }
        }
        return modules
    }
}

/// What docs/architecture.md says about the modules: in its "## Modules" section, the first code block (the
/// picture) and every table whose first column is `target` and last `imports` (a row: `` `Name` ``, a job, and the
/// modules it imports, comma-separated, or — for none).
struct ArchitectureDocument {
    let picture: String
    let rows: [String: Set<String>]

    init(_ text: String) {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let start = lines.firstIndex { $0.hasPrefix("## Modules") } ?? lines.endIndex
        let section = lines[start...].dropFirst().prefix { !$0.hasPrefix("## ") }
        let fence = section.drop { !$0.hasPrefix("```") }.dropFirst()
        picture = fence.prefix { !$0.hasPrefix("```") }.joined(separator: "\n")
        var rows = [String: Set<String>]()
        var inModuleTable = false
        for line in section {
            guard line.hasPrefix("|") else {
                inModuleTable = false
                continue
            }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) }
            if cells.first == "target", cells.last == "imports" {
                inModuleTable = true
                continue
            }
            guard inModuleTable, let name = cells.first, name.hasPrefix("`"), let imports = cells.last else { continue }
            rows[name.trimmingCharacters(in: CharacterSet(charactersIn: "`"))] =
                imports == "—"
                ? []
                : Set(imports.split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: " `")) })
        }
        self.rows = rows
    }
}
