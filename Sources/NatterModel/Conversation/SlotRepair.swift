/// Who re-keys when an epoch-opening commit sealed a member a key that does not open it (issue 19, item 8).
///
/// The member left out sees it in its own slot (`ConversationEntry.Body.wronglySealed`) but cannot repair it: it does
/// not hold the epoch key. Every member who holds the key and the members' profiles sees it too
/// (`KeySlots.wronglySealed` rebuilds every slot), and any of them can repair it with a re-key that chains the epoch,
/// so that the member left out reads it through the history chain. This rule names one of them, the same on every
/// node that sees the same commit, so that one re-key is written, not one per member.
public enum SlotRepair {
    /// The member who must re-key because the commit that opened `epoch`, written by `author`, sealed keys that do
    /// not open it to `wronglySealed`: the smallest identity of the epoch's roster that is still a member, was sealed
    /// the right key, and is not the author (whose commit it was: a broken client or a hostile one). Nil when
    /// nobody needs it — the epoch is no longer a head (a later epoch chains it, so those left out get its key from
    /// there), or nobody left out is still a member — or nobody qualifies (in a direct conversation only the author
    /// holds the key; the other side can only stop talking to it).
    public static func duty(
        epoch: EpochID, author: AuthorID, wronglySealed: Set<AuthorID>, in state: ConversationState
    ) -> AuthorID? {
        guard let info = state.epochs[epoch], state.epochHeads.contains(epoch),
            wronglySealed.contains(where: { state.members[$0] != nil })
        else { return nil }
        return info.roster.filter { state.members[$0] != nil && !wronglySealed.contains($0) && $0 != author }.min()
    }
}
