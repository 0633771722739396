/// A JSON value with its keys in a fixed order, encoded on one line: what `--json` prints per event
/// (docs/cli.md has the schema).
public indirect enum JSON: Sendable, Equatable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByBooleanLiteral
{
    case string(String)
    case int(Int64)
    case bool(Bool)
    case null
    case array([JSON])
    case object([(String, JSON)])

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }

    public static func == (lhs: JSON, rhs: JSON) -> Bool { lhs.encoded == rhs.encoded }

    /// An optional string: `null` when absent.
    public static func text(_ value: String?) -> JSON { value.map(JSON.string) ?? .null }

    /// Compact JSON on one line; every control character in strings escaped, so a line can never break.
    public var encoded: String {
        switch self {
        case .string(let text): return Self.quote(text)
        case .int(let number): return String(number)
        case .bool(let flag): return flag ? "true" : "false"
        case .null: return "null"
        case .array(let items): return "[" + items.map(\.encoded).joined(separator: ",") + "]"
        case .object(let fields):
            return "{" + fields.map { Self.quote($0.0) + ":" + $0.1.encoded }.joined(separator: ",") + "}"
        }
    }

    private static func quote(_ text: String) -> String {
        // Nothing to escape (no quote, backslash, control character, nor a byte that may start U+2028 or U+2029):
        // the text as it is, without walking its scalars.
        if !text.utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C || $0 == 0x7F || $0 == 0xE2 }) {
            return "\"" + text + "\""
        }
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _
            where scalar.value < 0x20 || scalar.value == 0x7F || scalar.value == 0x2028 || scalar.value == 0x2029:
                out +=
                    "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count)
                    + String(scalar.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
