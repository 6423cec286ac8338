import HammockCore
import HammockJSON
import Testing

/// A source's content survives every error (Siesta's rule: `latestError` never clears `content`), whatever
/// its code and however it comes: a load's answer, a push of the loader, a timeout the engine decides.
@Suite("Content survives every error") struct ContentSurvivesErrorsTests {
    /// Every code hammock writes or gives a meaning to, a plugin's own word, and none.
    static let codes: [SourceError.Code?] = [
        .timeout, .templateUnresolved, .selectMissing, .inputFailed, .invalidOptions, .notModifiedWithoutContent,
        .pluginFailed, .pluginGaveUp, .pluginTimeout, .tooLarge, .parseFailed, .cancelled, .fileMissing,
        .commandNotFound, .badWorkingDirectory, .outputTooLarge, .tooManyRedirects, SourceError.Code("spawnFailed"),
        SourceError.Code("rateLimited"), nil,
    ]

    @Test("every code the engine knows is here: the permanent ones included")
    func everyPermanentCodeIsCovered() {
        #expect(SourceError.Code.permanent.isSubset(of: Set(Self.codes.compactMap { $0 })))
    }

    @Test("an error of every code keeps the content, in the state and on the line, as a load's answer and as a push", arguments: ContentSurvivesErrorsTests.codes)
    func contentSurvives(_ code: SourceError.Code?) {
        let view = ViewDefinition(id: "v", sources: ["a"], display: .standard)
        for pushed in [false, true] {
            var core = EngineCore(configuration: Configuration(sources: [fakeSource("a")], views: [view]))
            var loadID: LoadID = 0
            for case .startLoad(let request) in core.start(now: at(0)) { loadID = request.loadID }
            _ = core.loadFinished(source: "a", loadID: loadID, outcome: .newData(["kept": true]), now: at(1))
            let error = SourceError(message: "failed with \(code?.rawValue ?? "no code")", httpStatus: 404, exitStatus: 2, code: code)
            let actions: [EngineAction]
            if pushed {
                actions = core.pushedError(source: "a", error: error, now: at(2))
            } else {
                for case .startLoad(let request) in core.handle(.load(.source("a")), now: at(2)) { loadID = request.loadID }
                actions = core.loadFinished(source: "a", loadID: loadID, outcome: .error(error), now: at(3))
            }
            let how = pushed ? "pushed" : "answered"
            #expect(core.state(of: "a")?.content == ["kept": true], "\(how) \(String(describing: code))")
            #expect(core.state(of: "a")?.latestError == error, "\(how) \(String(describing: code))")
            let lines = actions.compactMap { action -> OutputLine? in if case .emit(let line) = action { line } else { nil } }
            let errorLine = lines.first { if case .source(_, .error(_)?, _) = $0 { true } else { false } }
            guard case .source(_, _, let state)? = errorLine else {
                Issue.record("no error line: \(lines.map(\.summary))")
                continue
            }
            #expect(state.content == ["kept": true], "the error line keeps the content: \(how) \(String(describing: code))")
            #expect(core.viewState(0).content == ["a": ["kept": true]], "\(how) \(String(describing: code))")
        }
    }

    @Test("a load that times out keeps the content")
    func timeoutKeepsContent() {
        var core = EngineCore(configuration: Configuration(sources: [fakeSource("a", timeout: .seconds(1))]))
        var loadID: LoadID = 0
        for case .startLoad(let request) in core.start(now: at(0)) { loadID = request.loadID }
        _ = core.loadFinished(source: "a", loadID: loadID, outcome: .newData("kept"), now: at(1))
        _ = core.handle(.load(.source("a")), now: at(2))
        // The timeout and the 2 s grace pass without an answer.
        _ = core.tick(now: at(6))
        #expect(core.state(of: "a")?.latestError?.code == .timeout)
        #expect(core.state(of: "a")?.content == "kept")
    }
}
