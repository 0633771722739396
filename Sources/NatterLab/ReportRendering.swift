import Foundation

extension LabReport {
    /// The report for people: what ran, whether it passed, then one metric per line.
    public var text: String {
        let c = configuration
        var lines = [String]()
        lines.append(
            "natter lab: \(c.nodes) nodes, latency \(formatDuration(c.latency)) jitter \(formatDuration(c.jitter)), "
                + "\(formatNumber(c.rate)) ops/s for \(formatDuration(c.duration)), seed \(c.seed)")
        lines.append("replay: \(c.commandLine)")
        if faultTrace.isEmpty {
            lines.append("faults: none")
        } else {
            lines.append("faults:")
            lines += faultTrace.map { "  \($0)" }
        }
        lines.append(
            "timeline: workload from \(workloadStart.map(formatSeconds) ?? "-"), "
                + "heal at \(healAt.map(formatSeconds) ?? "-"), "
                + "end at \(formatSeconds(endedAt)) (\(events) events)")
        lines.append(
            "nodes: \(liveNodes) live, \(deadNodes) crashed for good; stranded records \(stranded)"
                + (frozenByForks > 0 ? "; records frozen by forks \(frozenByForks)" : ""))
        let kinds = operations.map { "\($0.count) \($0.name)" }.joined(separator: ", ")
        lines.append("operations: \(operationCount)" + (kinds.isEmpty ? "" : " (\(kinds))"))
        if !refused.isEmpty {
            lines.append("refused: " + refused.map { "\($0.count) × \($0.name)" }.joined(separator: "; "))
        }
        if passed {
            lines.append("checks: passed")
        } else {
            lines.append("checks: FAILED")
            lines += failures.map { "  \($0)" }
        }
        lines.append(
            "  checked: log digests equal on live nodes, conversation digests equal among members, "
                + "no acknowledged record lost, "
                + "causal buffers within bounds (max \(maxCausalBuffer)), links per node ≤ \(c.degreeMax) (max "
                + "\(maxDegree)), \(spotChecks) applied records spot-checked")
        lines.append("convergence after heal: \(convergence.map(formatSeconds) ?? "not reached")")
        if !partitionConvergence.isEmpty {
            lines.append(
                "convergence after each partition heal: "
                    + partitionConvergence.map { $0.map(formatSeconds) ?? "not reached" }.joined(separator: ", "))
        }
        lines.append(
            String(
                format: "messages per operation: %.1f (%d frames; %.0f bytes per operation; setup %d frames)",
                framesPerOperation, frames, bytesPerOperation, setupFrames))
        if !framesByKind.isEmpty {
            lines.append(
                "frames by kind: " + framesByKind.map { "\($0.name) \($0.count)" }.joined(separator: ", "))
        }
        lines.append(
            String(
                format: "redundant copies per delivered record: %.2f (%d delivered, %d new)", redundancy,
                recordsDelivered, recordsNew))
        if let latency {
            lines.append(
                "delivery latency: p50 \(formatMillis(latency.p50)) p95 \(formatMillis(latency.p95)) "
                    + "p99 \(formatMillis(latency.p99)) max \(formatMillis(latency.max)) "
                    + "over \(latency.count) deliveries"
                    + (undelivered > 0 ? ", \(undelivered) undelivered" : ""))
        } else {
            lines.append("delivery latency: no deliveries")
        }
        for delivery in slow {
            let path = delivery.path.map { "n\($0)" }.joined(separator: " ← ")
            lines.append(
                "slow: \(delivery.kind.rawValue) by n\(delivery.author) reached n\(delivery.receiver) at "
                    + "\(formatSeconds(delivery.at)) after \(formatMillis(delivery.took)); its tree: \(path)")
        }
        lines.append(String(format: "busiest node: %@ sent %.1f%% of frames", busiestNode, busiestShare * 100))
        lines.append("overlay at the workload's start: \(overlayAtStart.map(String.init(describing:)) ?? "-")")
        lines.append("overlay at the end: \(overlayAtEnd.map(String.init(describing:)) ?? "-")")
        lines.append("final log digest: \(logDigest) (\(recordsHeld) records held)")
        lines.append(
            "dials refused at the cap: \(dialsRefusedAtCap); links rotated: \(rotations); resets injected: "
                + "\(resetsInjected)")
        lines.append("coverage: " + coverage.counts.map { "\($0.name) \($0.count)" }.joined(separator: ", "))
        return lines.joined(separator: "\n") + "\n"
    }

    /// The report as one JSON object (keys sorted, durations in milliseconds), for scripts.
    public var json: String {
        func millis(_ duration: Duration?) -> JSON {
            duration.map { .number(Double(nanoseconds($0)) / 1e6) } ?? .null
        }
        let c = configuration
        var object: [String: JSON] = [
            "configuration": .object([
                "nodes": .int(c.nodes), "latency_ms": millis(c.latency), "jitter_ms": millis(c.jitter),
                "rate": .number(c.rate), "duration_ms": millis(c.duration), "seed": .string(String(c.seed)),
                "replay": .string(c.commandLine), "explicit_replay": .string(plan.commandLine),
            ]),
            "passed": .bool(passed),
            "failures": .array(failures.map(JSON.string)),
            "faults": .array(faultTrace.map(JSON.string)),
            "workload_start_ms": millis(workloadStart), "heal_ms": millis(healAt), "end_ms": millis(endedAt),
            "events": .int(events),
            "convergence_ms": millis(convergence),
            "partition_convergence_ms": .array(partitionConvergence.map(millis)),
            "operations": .int(operationCount),
            "operations_by_kind": .object(
                Dictionary(uniqueKeysWithValues: operations.map { ($0.name, JSON.int($0.count)) })),
            "refused": .object(Dictionary(uniqueKeysWithValues: refused.map { ($0.name, JSON.int($0.count)) })),
            "frames": .int(frames), "bytes": .int(bytes), "setup_frames": .int(setupFrames),
            "messages_per_operation": .number(framesPerOperation), "bytes_per_operation": .number(bytesPerOperation),
            "frames_by_kind": .object(
                Dictionary(uniqueKeysWithValues: framesByKind.map { ($0.name, JSON.int($0.count)) })),
            "records_delivered": .int(recordsDelivered), "records_new": .int(recordsNew),
            "redundant_copies_per_record": .number(redundancy),
            "undelivered": .int(undelivered),
            "busiest_node": .string(busiestNode), "busiest_share": .number(busiestShare),
            "live_nodes": .int(liveNodes), "dead_nodes": .int(deadNodes), "stranded": .int(stranded),
            "frozen_by_forks": .int(frozenByForks),
            "coverage": .object(
                Dictionary(uniqueKeysWithValues: coverage.counts.map { ($0.name, JSON.int($0.count)) })),
            "max_degree": .int(maxDegree), "max_causal_buffer": .int(maxCausalBuffer), "spot_checks": .int(spotChecks),
            "overlay_start": overlayAtStart.map(JSON.init) ?? .null,
            "overlay_end": overlayAtEnd.map(JSON.init) ?? .null,
            "log_digest": .string(logDigest), "records_held": .int(recordsHeld),
            "dials_refused_at_cap": .int(dialsRefusedAtCap), "resets_injected": .int(resetsInjected),
            "links_rotated": .int(rotations),
        ]
        if let latency {
            object["latency_ms"] = .object([
                "count": .int(latency.count), "p50": millis(latency.p50), "p95": millis(latency.p95),
                "p99": millis(latency.p99), "max": millis(latency.max),
            ])
        } else {
            object["latency_ms"] = .null
        }
        if configuration.slowThreshold != nil {
            object["slow_deliveries"] = .array(
                slow.map { delivery in
                    .object([
                        "kind": .string(delivery.kind.rawValue), "author": .string("n\(delivery.author)"),
                        "receiver": .string("n\(delivery.receiver)"), "at_ms": millis(delivery.at),
                        "took_ms": millis(delivery.took), "path": .array(delivery.path.map { .string("n\($0)") }),
                    ])
                })
        }
        return JSON.object(object).rendered + "\n"
    }
}

extension JSON {
    init(_ shape: OverlayShape) {
        self = .object([
            "nodes": .int(shape.nodes), "degree_min": .int(shape.degreeMin), "degree_mean": .number(shape.degreeMean),
            "degree_max": .int(shape.degreeMax), "diameter": shape.diameter.map(JSON.int) ?? .null,
            "mean_distance": .number(shape.meanDistance), "components": .int(shape.components),
        ])
    }
}

/// A minimal JSON value with a deterministic rendering (sorted keys, fixed number format).
enum JSON {
    case null
    case bool(Bool)
    case int(Int)
    case number(Double)
    case string(String)
    case array([JSON])
    case object([String: JSON])

    var rendered: String {
        switch self {
        case .null: return "null"
        case .bool(let value): return value ? "true" : "false"
        case .int(let value): return String(value)
        case .number(let value):
            guard value.isFinite else { return "null" }
            return String(format: "%.3f", value)
        case .string(let value): return Self.quote(value)
        case .array(let values): return "[" + values.map(\.rendered).joined(separator: ",") + "]"
        case .object(let members):
            return "{"
                + members.keys.sorted().map { Self.quote($0) + ":" + members[$0]!.rendered }.joined(separator: ",")
                + "}"
        }
    }

    static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            default:
                if scalar.value < 0x20 {
                    out += String(format: "\\u%04x", scalar.value)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
