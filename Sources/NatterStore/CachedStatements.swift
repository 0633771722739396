import GRDB

extension Database {
    /// Executes one statement from the connection's statement cache. `execute(sql:)` compiles its SQL at every call
    /// (it accepts several statements); the refresh path runs the same few statements for every record, and
    /// compiling them was an eighth of a lab run's time (perf, 2026-11-27).
    func executeCached(sql: String, arguments: StatementArguments = StatementArguments()) throws {
        try cachedStatement(sql: sql).execute(arguments: arguments)
    }
}
