import Testing

/// Inputs the fuzzers in fuzz/ found; each pins the fixed behaviour.
struct FuzzRegressionTests {
    /// A lone `---` (no final newline) was reported at 2:1, a line the file does not have.
    @Test func documentMarkerAloneIsReportedInsideTheText() {
        #expect(problems("---") == ["1:4: the configuration must be a mapping, found null"])
    }
}
