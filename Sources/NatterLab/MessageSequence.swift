/// Which frames a message-sequence diagram shows (`natter lab run --msc FILE`): a window of simulated time and the
/// nodes drawn. The lab records only these frames, so a diagram costs memory for its window alone.
public struct SequenceWindow: Sendable, Equatable {
    /// Where the window starts, in simulated time since the run began (nil: where the workload starts).
    public var from: Duration?
    public var length: Duration
    /// The nodes drawn, in this order (nil: the first `LabLimits.sequenceNodesMax`).
    public var nodes: [Int]?

    public init(from: Duration? = nil, length: Duration = .seconds(1), nodes: [Int]? = nil) {
        self.from = from
        self.length = length
        self.nodes = nodes
    }
}

/// The frames a run sent between the nodes of a `SequenceWindow`, for the diagram.
public struct SequenceLog: Sendable, Equatable {
    public struct Frame: Sendable, Equatable {
        public let from: Int
        public let to: Int
        public let kind: String
        public let bytes: Int
        public let sentAt: Duration
        /// When it arrived, or would have: a frame lost with its connection (reset, partition, crash) never did.
        public let arrivesAt: Duration
        public let lost: Bool
    }

    /// Something that happened to one node, or (node nil) to all: a crash, a restart, a partition, a publication.
    public struct Mark: Sendable, Equatable {
        public let node: Int?
        public let at: Duration
        public let label: String
    }

    public let window: SequenceWindow
    /// Where the window starts and the nodes drawn, as resolved when the run started.
    public let start: Duration
    public let nodes: [Int]
    public internal(set) var frames: [Frame] = []
    public internal(set) var marks: [Mark] = []
    /// Frames of the window that were not kept (beyond `LabLimits.sequenceFramesMax`).
    public internal(set) var framesLeftOut = 0

    init(window: SequenceWindow, start: Duration, nodes: [Int]) {
        self.window = window
        self.start = start
        self.nodes = nodes
    }

    func covers(_ time: Duration) -> Bool { time >= start && time < start + window.length }

    mutating func note(_ frame: Frame) {
        guard covers(frame.sentAt), nodes.contains(frame.from), nodes.contains(frame.to) else { return }
        guard frames.count < LabLimits.sequenceFramesMax else {
            framesLeftOut += 1
            return
        }
        frames.append(frame)
    }

    mutating func mark(_ node: Int?, _ label: String, at time: Duration) {
        guard covers(time), node.map(nodes.contains) ?? true, marks.count < LabLimits.sequenceFramesMax else { return }
        marks.append(Mark(node: node, at: time, label: label))
    }
}

extension SequenceLog {
    static let colours = [
        "records": "#1f77b4", "priority-records": "#17becf", "prune": "#ff7f0e", "request": "#9467bd",
        "reroute": "#d62728", "leaving": "#8c564b", "credit": "#7f7f7f", "priority-credit": "#7f7f7f",
        "handshake": "#bcbd22", "summary": "#2ca02c", "heads": "#2ca02c", "done": "#2ca02c", "ping": "#c7c7c7",
    ]

    /// The diagram: one lifeline per node, time downwards, an arrow per frame from its sending to its arrival
    /// (dashed and crossed when lost), coloured by kind, with the frame's details as a tooltip. At most
    /// `LabLimits.sequenceFramesMax` frames and about 3,000 pixels of height, whatever the window.
    public func svg(title: String) -> String {
        let columns = Double(max(nodes.count, 1))
        let top = 90.0
        let seconds = max(NatterLab.seconds(window.length), 0.001)
        let pixelsPerSecond = min(2_000, 2_900 / seconds)
        let height = top + seconds * pixelsPerSecond + 40
        let width = 120 + 110 * columns
        var picture = SVGPicture(width: width, height: height)
        func x(_ node: Int) -> Double { 90 + 110 * Double(nodes.firstIndex(of: node) ?? 0) }
        func y(_ time: Duration) -> Double { top + NatterLab.seconds(time - start) * pixelsPerSecond }
        func n(_ value: Double) -> String { SVGPicture.number(value) }
        picture.text(x: 12, y: 22, title, size: 14)
        picture.text(
            x: 12, y: 42,
            "\(frames.count) frames from \(formatSeconds(start)) for \(formatDuration(window.length))"
                + (framesLeftOut > 0 ? " (\(framesLeftOut) more not drawn: narrow the window)" : ""))
        var legend = 12.0
        for kind in ["records", "priority-records", "prune", "request", "reroute", "credit", "handshake", "summary"] {
            picture.add(
                "<line x1=\"\(n(legend))\" y1=\"58\" x2=\"\(n(legend + 16))\" y2=\"58\" stroke=\"\(Self.colours[kind]!)\" "
                    + "stroke-width=\"3\"/>")
            picture.text(x: legend + 20, y: 62, kind)
            legend += 28 + Double(kind.count) * 7
        }
        // Time ticks every 100 ms (every second for windows over 5 s).
        let tick: Duration = window.length > .seconds(5) ? .seconds(1) : .milliseconds(100)
        var mark = Duration.zero
        while mark <= window.length {
            picture.add(
                "<line x1=\"40\" y1=\"\(n(y(start + mark)))\" x2=\"\(n(width - 10))\" y2=\"\(n(y(start + mark)))\" "
                    + "stroke=\"#eee\"/>")
            picture.text(x: 36, y: y(start + mark) + 4, formatSeconds(start + mark), size: 9, anchor: "end")
            mark += tick
        }
        for mark in marks where mark.node == nil {
            picture.add(
                "<line x1=\"40\" y1=\"\(n(y(mark.at)))\" x2=\"\(n(width - 10))\" y2=\"\(n(y(mark.at)))\" "
                    + "stroke=\"#d62728\" stroke-dasharray=\"6 3\"/>")
            picture.text(x: width - 12, y: y(mark.at) - 3, mark.label, size: 10, anchor: "end")
        }
        for node in nodes {
            picture.add(
                "<line x1=\"\(n(x(node)))\" y1=\"\(n(top - 10))\" x2=\"\(n(x(node)))\" y2=\"\(n(height - 30))\" "
                    + "stroke=\"black\"/>")
            picture.text(x: x(node), y: top - 16, "n\(node)", anchor: "middle")
        }
        for frame in frames {
            let colour = Self.colours[frame.kind] ?? "#555"
            let tip =
                "n\(frame.from) → n\(frame.to): \(frame.kind), \(frame.bytes) bytes, sent \(formatSeconds(frame.sentAt)), "
                + (frame.lost ? "lost" : "arrived \(formatSeconds(frame.arrivesAt))")
            picture.add(
                "<line x1=\"\(n(x(frame.from)))\" y1=\"\(n(y(frame.sentAt)))\" x2=\"\(n(x(frame.to)))\" "
                    + "y2=\"\(n(y(frame.arrivesAt)))\" stroke=\"\(colour)\" stroke-width=\"1.2\""
                    + (frame.lost ? " stroke-dasharray=\"3 2\"" : "") + "><title>\(SVGPicture.escaped(tip))</title></line>")
            picture.add(
                "<circle cx=\"\(n(x(frame.to)))\" cy=\"\(n(y(frame.arrivesAt)))\" r=\"2\" fill=\"\(colour)\"/>")
            if frame.lost {
                picture.text(x: x(frame.to), y: y(frame.arrivesAt) + 4, "×", size: 14, anchor: "middle")
            }
        }
        for mark in marks {
            guard let node = mark.node else { continue }
            picture.add("<circle cx=\"\(n(x(node)))\" cy=\"\(n(y(mark.at)))\" r=\"4\" fill=\"white\" stroke=\"black\"/>")
            picture.text(x: x(node) + 6, y: y(mark.at) + 4, mark.label, size: 10)
        }
        return picture.rendered
    }
}

extension Simulation {
    /// Notes a frame for the diagram when one is being drawn.
    func noteFrame(_ from: Int, _ to: Int, kind: String, bytes: Int, sentAt: Duration, arrivesAt: Duration, lost: Bool) {
        guard sequence != nil else { return }
        sequence!.note(
            SequenceLog.Frame(
                from: from, to: to, kind: kind, bytes: bytes, sentAt: sentAt, arrivesAt: arrivesAt, lost: lost))
    }
}
