import Foundation
import NatterModel
import NatterStore

/// The search benchmark (`natter bench --search`): the `--queries` store (`messages` messages across
/// `conversations` groups, every line "message N in conversation I: the quick brown fox"), then the time of
/// `Conversations.search` for words that match every message, a hundred, one conversation's, or none.
public struct SearchBench {
    let conversations: Int
    let messages: Int
    let rounds: Int

    public init(conversations: Int, messages: Int, rounds: Int) {
        self.conversations = conversations
        self.messages = messages
        self.rounds = rounds
    }

    public struct Case {
        public let name: String
        public let hits: Int
        /// Sorted, one per round.
        public let millis: [Double]
    }

    public struct Result {
        public let populateSeconds: Double
        public let cases: [Case]
    }

    public func run(in directory: String) throws -> Result {
        let populated = try QueryBench(conversations: conversations, messages: messages).populate(in: directory)
        let service = populated.conversations
        let rare = "\(populated.perConversation / 2)"  // "message 500 …": one line per conversation
        let one = populated.ids[populated.ids.count / 2]
        let queries: [(String, String, ConversationID?)] = [
            ("common word, all conversations", "fox", nil),
            ("rare word, all conversations", rare, nil),
            ("two words, all conversations", "brown \(rare)", nil),
            ("common word, one conversation", "fox", one),
            ("no match", "zebra", nil),
            ("prefix, all conversations", "qui*", nil),
        ]
        var cases = [Case]()
        for (name, query, conversation) in queries {
            var hits = 0
            var millis = [Double]()
            for _ in 0..<rounds {
                millis.append(try timeMillis { hits = try service.search(query, in: conversation).count })
            }
            cases.append(Case(name: name + " (\"\(query)\")", hits: hits, millis: millis.sorted()))
        }
        return Result(populateSeconds: populated.seconds, cases: cases)
    }
}
