/// Names compared the way people see them: two names that look alike have the same skeleton (Unicode Technical
/// Standard #39, §4 "Confusable Detection"). "Victim" and "Victim" + U+200B (an invisible space), or a Latin "a" and
/// a Cyrillic "а", are the same name to a reader; a front end shows such a name with a fingerprint.
///
/// skeleton(X): decompose X (NFD), drop every Default_Ignorable_Code_Point, replace each character by its prototype
/// from confusables.txt, decompose again. The data is generated from Unicode's files (`ConfusableData`,
/// scripts/generate_confusables.py); the default-ignorable property and canonical combining classes come from the
/// Swift standard library.
public enum NameSkeleton {
    /// The UTS #39 skeleton of `text`.
    public static func skeleton(_ text: String) -> String {
        var decomposed = [Unicode.Scalar]()
        for scalar in text.unicodeScalars { decompose(scalar, into: &decomposed) }
        canonicalOrder(&decomposed)
        var mapped = [Unicode.Scalar]()
        mapped.reserveCapacity(decomposed.count)
        for scalar in decomposed where !scalar.properties.isDefaultIgnorableCodePoint {
            if let prototype = tables.prototypes[scalar.value] {
                mapped += prototype
            } else {
                mapped.append(scalar)
            }
        }
        // Prototypes are stored in NFD already; only their order against neighbouring marks can be off.
        canonicalOrder(&mapped)
        var out = String.UnicodeScalarView()
        out.append(contentsOf: mapped)
        return String(out)
    }

    /// What two names must share to be confusable: the skeleton of the name as written and of its lower case
    /// ("Alice" and "aIice" share the first; "Alice" and "alice" the second). Lower case alone would miss the
    /// confusables that differ in case, such as "I" and "l".
    public static func keys(_ name: String) -> Set<String> {
        [skeleton(name), skeleton(name.lowercased())]
    }

    /// Whether two names would be mistaken for each other.
    public static func areConfusable(_ a: String, _ b: String) -> Bool {
        !keys(a).isDisjoint(with: keys(b))
    }

    // MARK: - Normalisation

    private static let tables = Tables()

    private struct Tables: Sendable {
        let prototypes: [UInt32: [Unicode.Scalar]]
        let decompositions: [UInt32: [Unicode.Scalar]]

        init() {
            prototypes = Self.parse(ConfusableData.prototypes)
            decompositions = Self.parse(ConfusableData.decompositions)
        }

        /// Reads the packed form `ConfusableData` documents: "delta:target,target;…" in hex.
        static func parse(_ packed: String) -> [UInt32: [Unicode.Scalar]] {
            var table = [UInt32: [Unicode.Scalar]]()
            var code: UInt32 = 0
            for entry in packed.split(whereSeparator: { $0 == ";" || $0 == "\n" || $0 == " " }) {
                let parts = entry.split(separator: ":")
                code += UInt32(parts[0], radix: 16)!
                table[code] = parts[1].split(separator: ",").map { Unicode.Scalar(UInt32($0, radix: 16)!)! }
            }
            return table
        }
    }

    /// Hangul syllables decompose by arithmetic (The Unicode Standard, §3.12), not by table.
    private static let hangulBase: UInt32 = 0xAC00
    private static let hangulCount: UInt32 = 11_172

    private static func decompose(_ scalar: Unicode.Scalar, into out: inout [Unicode.Scalar]) {
        let value = scalar.value
        if value >= hangulBase, value < hangulBase + hangulCount {
            let index = value - hangulBase
            out.append(Unicode.Scalar(0x1100 + index / 588)!)
            out.append(Unicode.Scalar(0x1161 + (index % 588) / 28)!)
            if index % 28 != 0 { out.append(Unicode.Scalar(0x11A7 + index % 28)!) }
        } else if let parts = tables.decompositions[value] {
            out += parts
        } else {
            out.append(scalar)
        }
    }

    /// The canonical ordering algorithm: each run of combining marks sorted (stably) by combining class.
    private static func canonicalOrder(_ scalars: inout [Unicode.Scalar]) {
        var start = 0
        while start < scalars.count {
            guard scalars[start].properties.canonicalCombiningClass.rawValue != 0 else {
                start += 1
                continue
            }
            var end = start
            while end < scalars.count, scalars[end].properties.canonicalCombiningClass.rawValue != 0 { end += 1 }
            if end - start > 1 {
                let run = scalars[start..<end].enumerated().sorted {
                    let (a, b) = (
                        $0.element.properties.canonicalCombiningClass.rawValue,
                        $1.element.properties.canonicalCombiningClass.rawValue
                    )
                    return a != b ? a < b : $0.offset < $1.offset
                }
                scalars.replaceSubrange(start..<end, with: run.map(\.element))
            }
            start = end
        }
    }
}
