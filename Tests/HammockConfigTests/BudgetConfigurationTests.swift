import HammockConfig
import HammockCore
import Testing

/// `limits:` (shared budgets) and a source's `limit:` (issue 29): what reads, and each mistake at its place.
@Suite struct BudgetConfigurationTests {
    @Test func budgetsAndLimitsReadFromSourcesBasesAndDefaults() throws {
        let text = """
            limits:
              github: { requests: 5000, per: 1h }
              quick: { requests: 2, per: 1s }
              daily: { requests: 1000000, per: 24h }
            defaults: { limit: daily }
            bases:
              gh: { kind: rest, url: "https://api.github.com", limit: github }
            sources:
              repo: { base: gh }
              one: { kind: fake, limit: quick }
              other: { kind: fake }
            """
        let configuration = try load(text).configuration
        #expect(configuration.budgets == [
            "github": BudgetLimit(requests: 5000, per: .seconds(3600)),
            "quick": BudgetLimit(requests: 2, per: .seconds(1)),
            "daily": BudgetLimit(requests: 1_000_000, per: .seconds(86_400)),
        ])
        #expect(configuration.source("repo")?.limit == "github")
        #expect(configuration.source("one")?.limit == "quick")
        #expect(configuration.source("other")?.limit == "daily")
        // `limit` is a common key: the kind never sees it among its options.
        #expect(configuration.source("repo")?.options["limit"] == nil)
    }

    @Test func anUnknownBudgetIsReportedWhereItIsNamedWithDidYouMean() {
        let text = """
            limits:
              github: { requests: 5000, per: 1h }
            bases:
              gh: { kind: fake, limit: gihtub }
            sources:
              a: { kind: fake, limit: githbu }
              b: { base: gh }
              c: { kind: fake, limit: elsewhere }
            """
        #expect(problems(text) == [
            #"4:28: limit: unknown budget "gihtub" (did you mean "github"?); limits: declares github"#,
            #"6:27: limit: unknown budget "githbu" (did you mean "github"?); limits: declares github"#,
            #"8:27: limit: unknown budget "elsewhere"; limits: declares github"#,
        ])
        #expect(problems("sources:\n  a: { kind: fake, limit: x }\n") == [
            "2:27: limit: unknown budget \"x\"; the configuration has no `limits:`"
        ])
    }

    @Test func requestsMustBeAWholeNumberWithinTheBounds() {
        let text = """
            limits:
              missing: { per: 1s }
              zero: { requests: 0, per: 1s }
              negative: { requests: -3, per: 1s }
              huge: { requests: 1000001, per: 1s }
              fraction: { requests: 2.5, per: 1s }
              words: { requests: many, per: 1s }
              list: { requests: [1], per: 1s }
            sources:
              a: { kind: fake }
            """
        let bounds = "a whole number from 1 to 1000000"
        #expect(problems(text) == [
            "2:12: limits.missing has no requests: how many loads may start in any window of `per`",
            "3:21: limits.zero.requests must be \(bounds), found 0",
            "4:25: limits.negative.requests must be \(bounds), found -3",
            "5:21: limits.huge.requests must be \(bounds), found 1000001",
            "6:25: limits.fraction.requests must be \(bounds), found 2.5",
            "7:22: limits.words.requests must be \(bounds), found many",
            "8:21: limits.list.requests must be \(bounds), found a list",
        ])
    }

    @Test func perMustBeADurationOfAtMostADay() {
        let text = """
            limits:
              missing: { requests: 1 }
              zero: { requests: 1, per: 0s }
              bare: { requests: 1, per: 5 }
              long: { requests: 1, per: 25h }
              tiny: { requests: 1, per: 0.1ms }
            sources:
              a: { kind: fake }
            """
        #expect(problems(text) == [
            "2:12: limits.missing has no per: the window, such as 1s, 1m or 1h",
            "3:29: limits.zero.per must be longer than zero",
            #"4:29: limits.bare.per: "5" has no unit; write 5s, 5ms, 5m or 5h"#,
            "5:29: limits.long.per is 25h; a budget's window may be at most 24h (its starts are counted in memory since hammock started)",
            "6:29: limits.tiny.per must be longer than zero",
        ])
    }

    @Test func unknownKeysAndShapes() {
        let text = """
            limits:
              a: { requests: 1, per: 1s, burst: 3 }
              b: { requets: 1, per: 1s }
              c: 5
              bad name: { requests: 1, per: 1s }
            sources:
              s: { kind: fake }
            """
        #expect(problems(text) == [
            #"2:30: unknown key "burst" in limits.a; expected one of: requests, per"#,
            "3:6: limits.b has no requests: how many loads may start in any window of `per`",
            #"3:8: unknown key "requets" in limits.b (did you mean "requests"?)"#,
            "4:6: limits.c must be a mapping, found a number",
            #"5:3: budget name "bad name" must hold only letters, digits, _ and -"#,
        ])
        #expect(problems("limits: [a]\nsources:\n  s: { kind: fake }\n") == ["1:9: limits must be a mapping, found a list"])
    }

    @Test func aBudgetNobodyUsesIsFine() throws {
        let configuration = try load("limits:\n  spare: { requests: 1, per: 1s }\nsources:\n  s: { kind: fake }\n").configuration
        #expect(configuration.budgets["spare"] == BudgetLimit(requests: 1, per: .seconds(1)))
        #expect(configuration.source("s")?.limit == nil)
    }

    @Test func limitsBelongInTheMainFile() throws {
        let folder = try ConfigurationFolder()
        defer { folder.remove() }
        try folder.write("main.yaml", "include: more.yaml\nlimits:\n  main: { requests: 1, per: 1s }\nsources:\n  a: { kind: fake, limit: main }\n")
        // The included file's sources may draw from the main file's budgets; it may not declare its own.
        try folder.write("more.yaml", "limits:\n  other: { requests: 1, per: 1s }\nsources:\n  b: { kind: fake, limit: main }\n")
        #expect(folder.problems() == [
            "more.yaml:1:1: `limits:` belongs in the main file (main.yaml), where it applies to every file; an included file holds `sources:`, `views:`, `bases:` and `include:`"
        ])
    }
}
