import HammockCore
import Testing

@Suite struct CoalescingQueueBehaviour {
    @Test func aKeyedElementReplacesTheWaitingOneAndMovesToTheBack() {
        var queue = CoalescingQueue<String>()
        queue.append("a1", key: "a")
        queue.append("error", key: nil)
        queue.append("b1", key: "b")
        #expect(queue.append("a2", key: "a") == "a1")
        #expect(queue.waiting(forKey: "a") == "a2")
        #expect(queue.count == 3)
        #expect(queue.removeAll() == ["error", "b1", "a2"])
        #expect(queue.isEmpty)
        #expect(queue.waiting(forKey: "a") == nil)
    }

    @Test func replacementsStayBoundedHoweverManyArrive() {
        var queue = CoalescingQueue<Int>()
        for n in 0..<100_000 { queue.append(n, key: "k\(n % 3)") }
        #expect(queue.count == 3)
        #expect(queue.removeAll() == [99_997, 99_998, 99_999])
    }

    /// Issue 13: an answer (`ack`) must come after the newest state of what its op changed, even when that
    /// state replaced one waiting ahead of it.
    @Test func aBarrierFollowsTheNewerElementThatTookAPlaceAheadOfIt() {
        var queue = CoalescingQueue<String>()
        queue.append("b-override", key: "b")
        queue.appendBarrier("ack 1")
        queue.append("c1", key: "c")
        queue.appendBarrier("ack 2")
        #expect(queue.append("b-wipe", key: "b") == "b-override")
        queue.appendBarrier("ack 3")
        #expect(queue.count == 5)
        // c1 now waits ahead of every ack (they followed b-wipe): replacing it moves them all behind c2.
        queue.append("c2", key: "c")
        #expect(queue.removeAll() == ["b-wipe", "c2", "ack 1", "ack 2", "ack 3"])
        queue.append("a1", key: "a")
        queue.appendBarrier("ack 5")
        queue.append("d1", key: "d")
        queue.appendBarrier("ack 6")
        // d1 waited behind ack 5: only ack 6 moves.
        queue.append("d2", key: "d")
        #expect(queue.removeAll() == ["a1", "ack 5", "d2", "ack 6"])
        // Nothing waits: barriers start afresh.
        queue.appendBarrier("ack 4")
        queue.append("b2", key: "b")
        #expect(queue.removeAll() == ["ack 4", "b2"])
    }

    @Test func barriersStayInOrderAndBoundedUnderAFloodOfReplacements() {
        var queue = CoalescingQueue<String>()
        for round in 0..<200 {
            queue.append("s\(round % 7)-\(round)", key: "s\(round % 7)")
            if round % 10 == 0 { queue.appendBarrier("ack \(round / 10)") }
        }
        let taken = queue.removeAll()
        #expect(taken.count == 7 + 20)
        #expect(taken.filter { $0.hasPrefix("ack") } == (0..<20).map { "ack \($0)" })
        // The last ack follows every state that waited before it.
        let lastAck = taken.lastIndex { $0.hasPrefix("ack") }!
        #expect(taken[..<lastAck].filter { !$0.hasPrefix("ack") }.count == 7)
    }

    /// The fast path: an element that replaces the last one waiting stays where it is (at the back), with the
    /// same outcome as the general path, barriers included.
    @Test func replacingTheLastElementInPlaceKeepsTheOrder() {
        var queue = CoalescingQueue<String>()
        queue.append("a1", key: "a")
        queue.append("b1", key: "b")
        #expect(queue.append("b2", key: "b") == "b1")
        #expect(queue.append("b3", key: "b") == "b2")
        #expect(queue.count == 2)
        #expect(queue.removeAll() == ["a1", "b3"])
        queue.append("a1", key: "a")
        queue.appendBarrier("ack")
        // Not the last (the barrier is): the general path, and the barrier follows the newer element.
        #expect(queue.append("a2", key: "a") == "a1")
        #expect(queue.append("a3", key: "a") == "a2")
        #expect(queue.removeAll() == ["a3", "ack"])
    }
}
