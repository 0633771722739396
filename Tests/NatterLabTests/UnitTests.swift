// Goal: the lab's small parts do exactly what the simulator relies on: events at one instant keep their order,
// options parse and print back the same, and impossible configurations are refused with a reason. Method: direct
// calls on the event queue, the parsers and `LabConfiguration.problem`.
import NatterModel
import Testing

@testable import NatterLab

@Suite("Lab parts")
struct UnitTests {
    @Test("the event queue pops by time, and events at one instant in the order they were scheduled")
    func eventOrder() {
        var queue = EventQueue<Int>()
        var generator = SeededGenerator(seed: 3)
        var expected = [(Duration, Int)]()
        for number in 0..<500 {
            let time = Duration.milliseconds(Int64(generator.next() % 20))
            queue.push(number, at: time)
            expected.append((time, number))
        }
        expected.sort { ($0.0, $0.1) < ($1.0, $1.1) }
        var popped = [(Duration, Int)]()
        while let (time, event) = queue.pop() { popped.append((time, event)) }
        #expect(popped.map(\.1) == expected.map(\.1))
    }

    @Test("durations, rates and partitions parse, and print back as the options accept them")
    func parsing() {
        #expect(parseDuration("100ms") == .milliseconds(100))
        #expect(parseDuration("1.5s") == .milliseconds(1_500))
        #expect(parseDuration("2m") == .seconds(120))
        #expect(parseDuration("250us") == .microseconds(250))
        #expect(parseDuration("3") == .seconds(3))
        #expect(parseDuration("-1s") == nil && parseDuration("fast") == nil)
        #expect(parseRate("100/s") == 100 && parseRate("6000/m") == 100 && parseRate("7") == 7)
        for text in ["0s", "100ms", "1500ms", "20s", "250us"] {
            #expect(formatDuration(parseDuration(text)!) == text)
        }
        #expect(LabWindow(parsing: "10s:3s") == LabWindow(start: .seconds(10), length: .seconds(3)))
        #expect(LabWindow(parsing: "10s") == nil && LabWindow(parsing: "10s:0s") == nil)
    }

    @Test("impossible configurations are refused with a reason a person can act on")
    func problems() {
        var configuration = LabConfiguration()
        #expect(configuration.problem == nil)
        configuration.partitions = [LabWindow(start: .seconds(19), length: .seconds(2))]
        #expect(configuration.problem?.contains("must heal within the workload") == true)
        configuration.partitions = [
            LabWindow(start: .seconds(1), length: .seconds(3)), LabWindow(start: .seconds(2), length: .seconds(1)),
        ]
        #expect(configuration.problem?.contains("overlap") == true)
        configuration = LabConfiguration()
        configuration.nodes = 1
        #expect(configuration.problem?.contains("--nodes") == true)
        configuration = LabConfiguration()
        configuration.crashes = 25
        #expect(configuration.problem != nil)
        configuration = LabConfiguration()
        configuration.latency = .zero
        #expect(configuration.problem?.contains("latency") == true)
        #expect(throws: LabError.self) { try LabSimulation(configuration) }
    }

    @Test("faults print as --fault takes them and parse back the same")
    func faults() {
        let faults: [LabFault] = [
            .partition(at: .seconds(10), length: .seconds(3), apart: nil),
            .partition(at: .milliseconds(1_500), length: .milliseconds(700), apart: [1, 4]),
            .crash(node: 3, at: .milliseconds(1_200), restartAfter: nil),
            .crash(node: 3, at: .milliseconds(1_200), restartAfter: .milliseconds(800)),
            .stall(at: .seconds(2), length: .milliseconds(1_500)),
            .twin(node: 2, at: .seconds(1), length: .milliseconds(500)),
        ]
        #expect(faults.map(\.description) == [
            "partition@10s+3s", "partition@1500ms+700ms:n1.n4", "crash:n3@1200ms", "crash:n3@1200ms+800ms",
            "stall@2s+1500ms", "twin:n2@1s+500ms",
        ])
        #expect(faults.map { LabFault(parsing: $0.description) } == faults.map(Optional.init))
        for bad in ["partition@1s", "crash@1s", "crash:x3@1s", "stall@2s", "twin:n2@1s", "flood@1s+1s", "partition@1s+1s:"] {
            #expect(LabFault(parsing: bad) == nil, "\(bad)")
        }
        var configuration = LabConfiguration()
        configuration.nodes = 5
        configuration.duration = .seconds(4)
        configuration.faults = [.crash(node: 7, at: .seconds(1), restartAfter: nil)]
        #expect(configuration.problem?.contains("names n7") == true)
        configuration.faults = [.partition(at: .seconds(3), length: .seconds(2), apart: [1])]
        #expect(configuration.problem?.contains("must heal within the workload") == true)
        configuration.faults = [.twin(node: 0, at: .seconds(1), length: .seconds(1))]
        #expect(configuration.problem?.contains("other than n0") == true)
        configuration.faults = [.partition(at: .seconds(1), length: .seconds(2), apart: nil)]
        configuration.partitions = [LabWindow(start: .seconds(2), length: .seconds(1))]
        #expect(configuration.problem?.contains("overlap") == true)
    }

    @Test("the replay command names every option that differs from the defaults")
    func commandLine() {
        var configuration = LabConfiguration()
        configuration.seed = 17
        configuration.partitions = [LabWindow(start: .seconds(10), length: .milliseconds(2_500))]
        configuration.crashRestarts = 2
        configuration.resetRate = 0.05
        configuration.churn = true
        #expect(
            configuration.commandLine
                == "natter lab run --seed 17 --nodes 25 --latency 100ms --jitter 0s --rate 100 --duration 20s "
                + "--partition 10s:2500ms --crash-restart 2 --reset-rate 0.05 --churn")
    }
}
