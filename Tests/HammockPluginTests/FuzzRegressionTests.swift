import HammockCore
import HammockProtocol
import Testing

/// Inputs the fuzzers in fuzz/ found crashing the protocol decoder; each must now decode (or fail) cleanly.
struct FuzzRegressionTests {
    /// `retryAfter` seconds × 1000 was converted to Int64 unchecked, so a huge or overflowing value trapped
    /// the engine on a plugin's error line.
    @Test(arguments: ["1e300", "1e400", "-1e300", "9223372036854775.808", "-9.3e15"])
    func retryAfterOutOfRangeIsIgnored(_ seconds: String) throws {
        let line = #"{"type":"error","id":5,"error":{"message":"x","retryAfter":\#(seconds)}}"#
        let message = try PluginMessage(line: Array(line.utf8))
        #expect(message == .error(id: 5, source: nil, error: SourceError(message: "x")))
    }

    @Test func retryAfterInRangeIsKept() throws {
        let line = #"{"type":"error","id":5,"error":{"message":"x","retryAfter":9e15}}"#
        guard case .error(_, _, let error) = try PluginMessage(line: Array(line.utf8)) else {
            Issue.record("not an error message")
            return
        }
        #expect(error.retryAfter == .seconds(9_000_000_000_000_000))
    }
}
