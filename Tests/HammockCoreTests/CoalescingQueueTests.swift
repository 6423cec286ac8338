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
}
