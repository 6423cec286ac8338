import HammockClient
import HammockCore
import Testing

/// Fakes need no engine: consumer code is tested and previewed against them in-process.
@Suite("Fake sources and views")
struct ClientFakeTests {
    @Test("a fake source's states and control")
    func fakeSource() async throws {
        let loaded = TypedSource.fake(Greeting(text: "hi", count: 1))
        #expect(loaded.state.content == Greeting(text: "hi", count: 1))
        #expect(loaded.state.timestamp != nil)
        #expect(try await first("the fake's content", in: loaded.contents) == Greeting(text: "hi", count: 1))
        // Control does nothing, and does not fail.
        try await loaded.load()
        try await loaded.override(Greeting(text: "ignored", count: 0))
        #expect(loaded.state.content?.text == "hi")

        let loading = TypedSource<Greeting>.fakeLoading()
        #expect(loading.state.isLoading && loading.state.content == nil)

        let error = LoadError(message: "down", httpStatus: 503)
        let failed = TypedSource.fakeFailure(error, content: Greeting(text: "stale", count: 2))
        #expect(failed.state.latestError == error)
        #expect(failed.state.content?.text == "stale")
        #expect(failed.state.failures == 1)
    }

    @Test("a fake view's states")
    func fakeView() async throws {
        let view = TypedView.fake(Both(greeting: Greeting(text: "hi", count: 1), numbers: [1]))
        #expect(view.status == .data)
        #expect(view.state.content?.numbers == [1])
        #expect(try await first("the fake view's state", in: view.viewStates).status == .data)

        let loading = TypedView<Both>.fakeLoading()
        #expect(loading.state.isLoading)

        let failed = TypedView<Both>.fakeFailure(LoadError(message: "down"), source: "numbers")
        #expect(failed.status == .error)
        #expect(failed.errors == [ViewError(source: "numbers", error: LoadError(message: "down"))])
        #expect(failed.canTryAgain)
        #expect(failed.state.failures == 1)
        try await failed.retry()
    }

    @Test("any Loadable: a fake source and a fake view read alike")
    func loadableExistential() async throws {
        let items: [any Loadable] = [TypedSource.fake(1), TypedView<Both>.fakeLoading()]
        #expect(items.map { $0.isLoadingNow } == [false, true])
    }
}

extension Loadable {
    fileprivate var isLoadingNow: Bool { state.isLoading }
}
