import Foundation
import Synchronization
import Testing

@testable import HammockShellPlugin

/// The shell plugin's bound on commands running at once, in-process.
@Suite(.timeLimit(.minutes(1))) struct CommandSlotsTests {
    /// The order in which waiters got their slot.
    private final class Order: Sendable {
        let list = Mutex<[Int]>([])
    }

    @Test func waitersGetSlotsInTheOrderTheyCame() async {
        let slots = CommandSlots(limit: 1)
        #expect(await slots.acquire())
        let order = Order()
        var waiting: [Task<Void, Never>] = []
        for index in 0..<5 {
            waiting.append(Task {
                #expect(await slots.acquire())
                order.list.withLock { $0.append(index) }
                slots.release()
            })
            // Each waiter queues before the next starts, so the order they came in is known.
            while slots.waiterCount < index + 1 { await Task.yield() }
        }
        slots.release()
        for task in waiting { await task.value }
        #expect(order.list.withLock { $0 } == [0, 1, 2, 3, 4])
    }

    @Test func aCancelledWaiterLeavesTheQueueWithoutASlot() async {
        let slots = CommandSlots(limit: 1)
        #expect(await slots.acquire())
        let waiter = Task { await slots.acquire() }
        while slots.waiterCount < 1 { await Task.yield() }
        waiter.cancel()
        #expect(await waiter.value == false)
        #expect(slots.waiterCount == 0)
        slots.release()
        // The one slot is free again: the cancelled waiter did not take it.
        #expect(await slots.acquire())
    }

    @Test func theLimitComesFromTheEnvironmentOrDefaultsToTheMachine() {
        #expect(CommandSlots.defaultLimit >= 8)
        #expect(CommandSlots.configuredLimit(environment: [:]) == (CommandSlots.defaultLimit, nil))
        #expect(CommandSlots.configuredLimit(environment: ["HAMMOCK_SHELL_CONCURRENCY": "3"]) == (3, nil))
        // Spaces and tabs around the number are trimmed (as Foundation's `.whitespaces` did); a line break is not.
        #expect(CommandSlots.configuredLimit(environment: ["HAMMOCK_SHELL_CONCURRENCY": " \t5 "]) == (5, nil))
        #expect(CommandSlots.configuredLimit(environment: ["HAMMOCK_SHELL_CONCURRENCY": "5\n"]).problem != nil)
        let bad = CommandSlots.configuredLimit(environment: ["HAMMOCK_SHELL_CONCURRENCY": "0"])
        #expect(bad.limit == CommandSlots.defaultLimit)
        #expect(bad.problem?.contains("not a positive integer") == true)
    }

    /// The README's "default 4 per processor, at least 8", on machines of each size.
    @Test func theDefaultIsFourPerProcessorAndAtLeastEight() {
        #expect([1, 2, 3, 4, 16, 64].map { CommandSlots.defaultLimit(processors: $0) } == [8, 8, 12, 16, 64, 256])
        #expect(CommandSlots.defaultLimit == CommandSlots.defaultLimit(processors: ProcessInfo.processInfo.activeProcessorCount))
    }
}
