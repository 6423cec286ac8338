import HammockCore
import HammockJSON
import HammockPluginKit
import Synchronization

/// `mode: poll`: every load runs the command once and answers with its whole output.
final class PollSource: PluginSource {
    let options: ShellOptions
    private let plan: CommandPlan
    /// Shared by every poll source of the plugin: how many commands may run at once.
    private let slots: CommandSlots
    /// The plugin's, shared by all its sources.
    private let watcher: CommandWatcher
    private struct State {
        var running: [ObjectIdentifier: ProcessGroupHandle] = [:]
        var stopped = false
    }
    /// A `Mutex`: `load`, `cancel` and `stop` touch it for a dictionary update each, from any task.
    private let state = Mutex(State())

    init(options: ShellOptions, slots: CommandSlots, watcher: CommandWatcher) {
        self.options = options
        self.slots = slots
        self.watcher = watcher
        plan = CommandPlan(options)
    }

    func load(_ request: PluginLoadRequest) async -> PluginLoadResult {
        let handle = ProcessGroupHandle()
        let key = ObjectIdentifier(handle)
        guard state.withLock({ state in
            guard !state.stopped else { return false }
            state.running[key] = handle
            return true
        }) else { return .error(SourceError(message: "the source was stopped", code: .stopped)) }
        defer { _ = state.withLock { $0.running.removeValue(forKey: key) } }
        guard await slots.acquire() else { return .error(SourceError(message: "the load was cancelled", code: .stopped)) }
        defer { slots.release() }
        request.started()

        // A cancelled load ends the process group through the handle; the run goes on until the command is
        // reaped (it awaits nothing that cancellation cuts short), so no process of it is left when the load
        // returns. The timeout counts from here, in the engine (`started`) as in the run.
        let (options, plan, watcher) = (self.options, self.plan, self.watcher)
        return await withTaskCancellationHandler {
            await Self.run(options, plan, handle: handle, watcher: watcher, timeout: request.timeout)
        } onCancel: {
            handle.endSoon(.cancelled)
        }
    }

    func stop() async {
        let handles = state.withLock { state in
            state.stopped = true
            return Array(state.running.values)
        }
        await withTaskGroup(of: Void.self) { group in
            for handle in handles { group.addTask { await handle.end(.stopped) } }
        }
    }

    private static func run(
        _ options: ShellOptions, _ plan: CommandPlan, handle: ProcessGroupHandle, watcher: CommandWatcher,
        timeout: Duration?
    ) async -> PluginLoadResult {
        var output: [UInt8] = []
        let start = ContinuousClock.now
        let result = await runCommand(plan, handle: handle, watcher: watcher, timeout: timeout) { bytes in
            guard output.count + bytes.count <= options.maxBytes else {
                handle.endSoon(.outputTooLarge)
                return false
            }
            output += bytes
            return true
        }
        if result.endReason == .outputTooLarge {
            return .error(
                SourceError(
                    message: "output exceeded maxBytes (\(options.maxBytes) bytes); the command was ended",
                    code: .outputTooLarge))
        }
        if let failure = result.failure() { return .error(failure) }
        // Only a run that exited 0 gets here: a failed one is the source's error, with its `exitStatus`.
        let meta: JSONObject = [
            "exitStatus": 0, "durationMs": .number(JSONNumber(Int((ContinuousClock.now - start).milliseconds))),
            "outputBytes": .number(JSONNumber(output.count)),
        ]
        switch options.parse.parse(output: output) {
        case .success(let content): return PluginLoadResult.newData(content).meta(meta)
        case .failure(let error): return .error(error)
        }
    }
}
