import Foundation
import HammockJSON
import Testing

@testable import HammockClient

/// An error as a line carries it: the fields, and `retryAt` (issue 29: when hammock asks again).
@Suite struct LoadErrorTests {
    @Test func retryAtIsReadAsADate() throws {
        let line = try JSONValue(
            parsing: #"{"type":"source","seq":3,"id":"gh","event":"error","state":{"content":null,"latestError":{"message":"used up","code":"rateLimited","retryAt":"2026-11-22T11:00:00.000Z"},"isLoading":false,"timestamp":"2026-11-22T10:00:00.000Z","failures":1}}"#)
        guard case .source(_, let state)? = EngineLine(line) else {
            Issue.record("not a source line")
            return
        }
        #expect(state.latestError?.code == "rateLimited")
        #expect(state.latestError?.retryAt == Date(timeIntervalSince1970: 1_795_345_200))
        let plain = try JSONValue(parsing: #"{"message":"down","httpStatus":503}"#)
        #expect(LoadError(json: plain) == LoadError(message: "down", httpStatus: 503))
    }
}
