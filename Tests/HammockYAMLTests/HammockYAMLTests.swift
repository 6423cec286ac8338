import Testing
@testable import HammockYAML

// MARK: - Helpers

private func load(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> YAMLNode {
    let node = try YAML.parse(text)
    return try #require(node, "expected a document", sourceLocation: sourceLocation)
}

private func parseError(_ text: String) -> YAMLError? {
    do {
        _ = try YAML.parse(text)
        return nil
    } catch {
        return error
    }
}

private func resolved(_ text: String) throws -> YAMLResolvedScalar? {
    try load(text).scalar?.resolved
}

private extension YAMLNode {
    /// First value whose key has this text.
    subscript(_ key: String) -> YAMLNode? {
        mapping?.first { $0.key.scalar?.text == key }?.value
    }

    subscript(_ index: Int) -> YAMLNode? {
        guard let items = sequence, items.indices.contains(index) else { return nil }
        return items[index]
    }

    var keys: [String] {
        mapping?.compactMap { $0.key.scalar?.text } ?? []
    }

    var resolved: YAMLResolvedScalar? { scalar?.resolved }
}

private func mark(_ line: Int, _ column: Int) -> YAMLMark {
    YAMLMark(line: line, column: column)
}

// MARK: - Scalars

@Test func nullScalars() throws {
    for text in ["~", "null", "Null", "NULL"] {
        #expect(try resolved(text) == .null, "\(text)")
    }
    let doc = try load("a:\nb: ~\n")
    #expect(doc["a"]?.resolved == .null)
    #expect(doc["a"]?.kindName == "null")
}

@Test func boolScalars() throws {
    for text in ["true", "True", "TRUE"] { #expect(try resolved(text) == .bool(true), "\(text)") }
    for text in ["false", "False", "FALSE"] { #expect(try resolved(text) == .bool(false), "\(text)") }
}

@Test func yaml11BooleansStayStrings() throws {
    for text in ["yes", "no", "on", "off", "Yes", "NO", "On", "OFF", "y", "n", "tRUE"] {
        #expect(try resolved(text) == .string(text), "\(text)")
    }
    let doc = try load("country: no\nswitch: off\n")
    #expect(doc["country"]?.resolved == .string("no"))
    #expect(doc["switch"]?.kindName == "a string")
}

@Test func quotedScalarsAreAlwaysStrings() throws {
    let doc = try load("""
        a: "true"
        b: '42'
        c: "null"
        d: ""
        e: |
          1.5
        """)
    #expect(doc["a"]?.resolved == .string("true"))
    #expect(doc["a"]?.scalar?.style == .doubleQuoted)
    #expect(doc["b"]?.resolved == .string("42"))
    #expect(doc["b"]?.scalar?.style == .singleQuoted)
    #expect(doc["c"]?.resolved == .string("null"))
    #expect(doc["d"]?.resolved == .string(""))
    #expect(doc["e"]?.resolved == .string("1.5"))  // clip chomping, and the text has no final newline
}

@Test func intScalars() throws {
    #expect(try resolved("0") == .int(0))
    #expect(try resolved("42") == .int(42))
    #expect(try resolved("-17") == .int(-17))
    #expect(try resolved("+12") == .int(12))
    #expect(try resolved("007") == .int(7))
    #expect(try resolved("0x1F") == .int(31))
    #expect(try resolved("0xff") == .int(255))
    #expect(try resolved("0o17") == .int(15))
    #expect(try resolved("9223372036854775807") == .int(Int.max))
    #expect(try resolved("-9223372036854775808") == .int(Int.min))
    #expect(try load("n: 3").kindName == "a mapping")
    #expect(try load("3").kindName == "a number")
}

@Test func intOverflowBecomesFloat() throws {
    #expect(try resolved("9223372036854775808") == .float(9223372036854775808.0))
    #expect(try resolved("0x10000000000000000") == .float(18446744073709551616.0))
}

@Test func notQuiteNumbersAreStrings() throws {
    for text in ["0x", "0o", "0o8", "0xg", "1_000", "1.2.3", "e5", "1e", "+", ".", "0b101", "1:30", "-1-", "inf", "nan", "+.nan", "12abc"] {
        #expect(try resolved(text) == .string(text), "\(text)")
    }
}

@Test func floatScalars() throws {
    #expect(try resolved("1.5") == .float(1.5))
    #expect(try resolved("-2e3") == .float(-2000))
    #expect(try resolved(".5") == .float(0.5))
    #expect(try resolved("1.") == .float(1))
    #expect(try resolved("6.02E+23") == .float(6.02e23))
    #expect(try resolved(".inf") == .float(.infinity))
    #expect(try resolved(".Inf") == .float(.infinity))
    #expect(try resolved("+.INF") == .float(.infinity))
    #expect(try resolved("-.inf") == .float(-.infinity))
    for text in [".nan", ".NaN", ".NAN"] {
        guard case .float(let value)? = try resolved(text) else {
            Issue.record("\(text) did not resolve to a float")
            continue
        }
        #expect(value.isNaN)
    }
    #expect(try load("1.5").kindName == "a number")
}

@Test func explicitTags() throws {
    let doc = try load("""
        a: !!str 42
        b: !!int "42"
        c: !!float 1
        d: !!bool "true"
        e: !!null ""
        f: ! 12
        g: !custom 12
        """)
    #expect(doc["a"]?.resolved == .string("42"))
    #expect(doc["a"]?.scalar?.tag == "tag:yaml.org,2002:str")
    #expect(doc["b"]?.resolved == .int(42))
    #expect(doc["c"]?.resolved == .float(1))
    #expect(doc["d"]?.resolved == .bool(true))
    #expect(doc["e"]?.resolved == .null)
    #expect(doc["f"]?.resolved == .string("12"))
    #expect(doc["g"]?.resolved == .string("12"))
    #expect(doc["g"]?.scalar?.tag == "!custom")
}

@Test func mismatchedExplicitTagIsAnError() throws {
    let error = try #require(parseError("a: 1\nb: !!int abc\n"))
    #expect(error.mark == mark(2, 4))
    #expect(error.message == "\"abc\" is not a valid !!int")
    #expect(parseError("!!bool yes")?.message == "\"yes\" is not a valid !!bool")
    #expect(parseError("!!null 0") != nil)
    #expect(parseError("!!float x") != nil)
    #expect(parseError("!!int 1.5") != nil)
}

// MARK: - Structure and marks

@Test func nestedMarks() throws {
    let doc = try load("""
        server:
          name: main
          port:  8080
          hosts:
            - alpha
            - beta
        """)
    #expect(doc.mark == mark(1, 1))
    let server = try #require(doc["server"])
    #expect(server.mark == mark(2, 3))
    let pairs = try #require(server.mapping)
    #expect(pairs.map(\.key.mark) == [mark(2, 3), mark(3, 3), mark(4, 3)])
    #expect(pairs[0].value.mark == mark(2, 9))
    #expect(pairs[1].value.mark == mark(3, 10))
    #expect(pairs[1].value.resolved == .int(8080))
    let hosts = try #require(server["hosts"]?.sequence)
    #expect(hosts.map(\.mark) == [mark(5, 7), mark(6, 7)])
    #expect(hosts.map(\.resolved) == [.string("alpha"), .string("beta")])
    #expect(server["hosts"]?.kindName == "a list")
}

@Test func valueOnLine3Column9() throws {
    let doc = try load("""
        # config
        job:
          input: data.csv
        """)
    #expect(doc["job"]?["input"]?.mark == mark(3, 10))
    let doc2 = try load("a:\n  b:\n    c: value\n")
    #expect(doc2["a"]?["b"]?["c"]?.mark == mark(3, 8))
    let doc3 = try load("a:\n  bb:\n    cc: x\n  d:    value\n")
    #expect(doc3["a"]?["d"]?.mark == mark(4, 9))
}

@Test func columnsCountCharactersNotBytes() throws {
    let doc = try load("héllo: wörld\nnext: 1\n")
    let pairs = try #require(doc.mapping)
    #expect(pairs[0].value.mark == mark(1, 8))
    #expect(pairs[1].value.mark == mark(2, 7))
}

@Test func flowStyle() throws {
    let doc = try load("""
        point: {x: 1, y: -2.5}
        tags: [a, "b", 3]
        empty: {}
        none: []
        """)
    #expect(doc["point"]?["x"]?.resolved == .int(1))
    #expect(doc["point"]?["y"]?.resolved == .float(-2.5))
    #expect(doc["point"]?["y"]?.mark == mark(1, 18))
    #expect(doc["tags"]?.sequence?.map(\.resolved) == [.string("a"), .string("b"), .int(3)])
    #expect(doc["tags"]?[1]?.mark == mark(2, 11))
    #expect(doc["empty"]?.mapping?.isEmpty == true)
    #expect(doc["none"]?.sequence?.isEmpty == true)
}

@Test func literalAndFoldedBlocks() throws {
    let doc = try load("""
        literal: |
          line one
          line two
        folded: >
          folded
          text
        strip: |-
          no newline
        """)
    #expect(doc["literal"]?.scalar == YAMLScalar(text: "line one\nline two\n", style: .literal))
    #expect(doc["folded"]?.scalar == YAMLScalar(text: "folded text\n", style: .folded))
    #expect(doc["strip"]?.resolved == .string("no newline"))
    #expect(doc["literal"]?.mark == mark(1, 10))
}

@Test func nonScalarKeysAreKept() throws {
    let doc = try load("? [a, b]\n: 1\n? [a, b]\n: 2\n")
    #expect(doc.mapping?.count == 2)
}

// MARK: - Anchors, aliases and merge keys

@Test func anchorsAndAliases() throws {
    let doc = try load("""
        base: &b
          x: 1
        copy: *b
        name: &n hello
        again: *n
        """)
    let copy = try #require(doc["copy"])
    #expect(copy["x"]?.resolved == .int(1))
    // The copy keeps the marks of the anchored node; libyaml starts a node
    // at its properties, so that is the `&b` on line 1.
    #expect(copy.mark == mark(1, 7))
    #expect(copy["x"]?.mark == mark(2, 6))
    #expect(doc["again"]?.resolved == .string("hello"))
    #expect(doc["again"]?.mark == mark(4, 7))
}

@Test func aliasCanBeRedefined() throws {
    let doc = try load("a: &x 1\nb: *x\nc: &x 2\nd: *x\n")
    #expect(doc["b"]?.resolved == .int(1))
    #expect(doc["d"]?.resolved == .int(2))
}

@Test func unknownAlias() throws {
    let error = try #require(parseError("a: 1\nb: *missing\n"))
    #expect(error.mark == mark(2, 4))
    #expect(error.message == "unknown alias \"*missing\"")
}

@Test func selfReferenceIsUnknownAlias() throws {
    let error = try #require(parseError("a: &a [1, *a]\n"))
    #expect(error.message.hasPrefix("unknown alias"))
    #expect(error.mark == mark(1, 11))
}

@Test func mergeSingleMapping() throws {
    let doc = try load("""
        base: &base
          image: ubuntu
          cpu: 1
        job:
          <<: *base
          cpu: 4
        """)
    let job = try #require(doc["job"])
    #expect(job.keys == ["image", "cpu"])
    #expect(job["cpu"]?.resolved == .int(4))
    #expect(job["image"]?.resolved == .string("ubuntu"))
    #expect(job["image"]?.mark == mark(2, 10))
}

@Test func mergeListPrecedence() throws {
    let doc = try load("""
        a: &a {x: a, y: a, z: a}
        b: &b {y: b, w: b}
        m:
          z: own
          <<: [*a, *b]
        """)
    let m = try #require(doc["m"])
    #expect(m["x"]?.resolved == .string("a"))
    #expect(m["y"]?.resolved == .string("a"))  // earlier merge source wins
    #expect(m["z"]?.resolved == .string("own"))  // explicit key wins
    #expect(m["w"]?.resolved == .string("b"))
    #expect(m.keys == ["z", "x", "y", "w"])
}

@Test func mergeInlineMapping() throws {
    let doc = try load("m:\n  <<: {a: 1}\n  b: 2\n")
    #expect(doc["m"]?.keys == ["a", "b"])
}

@Test func quotedMergeKeyIsOrdinary() throws {
    let doc = try load("m:\n  \"<<\": {a: 1}\n")
    #expect(doc["m"]?.keys == ["<<"])
}

@Test func mergeOfNonMappingIsAnError() throws {
    let scalar = try #require(parseError("s: &s hello\nm:\n  <<: *s\n"))
    #expect(scalar.mark == mark(3, 7))
    #expect(scalar.message == "merge key value must be a mapping or a list of mappings, found a string")

    let listEntry = try #require(parseError("a: &a {x: 1}\nl: &l [1]\nm:\n  <<: [*a, *l]\n"))
    #expect(listEntry.mark == mark(4, 12))
    #expect(listEntry.message == "merge key list entries must be mappings, found a list")

    let plain = try #require(parseError("m:\n  <<: 3\n"))
    #expect(plain.mark == mark(2, 7))
}

@Test func mergedKeysAreNotDuplicates() throws {
    let doc = try load("a: &a {k: 1}\nb: &b {k: 2}\nm:\n  k: 0\n  <<: [*a, *b]\n")
    #expect(doc["m"]?.mapping?.count == 1)
    #expect(doc["m"]?["k"]?.resolved == .int(0))
}

// MARK: - Errors

@Test func duplicateKey() throws {
    let error = try #require(parseError("""
        job:
          x: 1
          name: a
          name: b
        """))
    #expect(error.mark == mark(4, 3))
    #expect(error.message == "duplicate key \"name\" (first at 3:3)")
    #expect(error.description == "4:3: duplicate key \"name\" (first at 3:3)")
}

@Test func duplicateKeyInFlowMappingAndByText() throws {
    #expect(parseError("{a: 1, b: 2, a: 3}")?.mark == mark(1, 14))
    // Keys compare by text, whatever their style.
    #expect(parseError("1: x\n\"1\": y\n")?.message == "duplicate key \"1\" (first at 1:1)")
}

@Test func multipleDocuments() throws {
    let error = try #require(parseError("a: 1\n---\nb: 2\n"))
    #expect(error.mark == mark(2, 1))
    #expect(error.message == "multiple YAML documents are not supported (found a second document)")
    #expect(try load("---\na: 1\n...\n")["a"]?.resolved == .int(1))
}

@Test func unclosedQuote() throws {
    let error = try #require(parseError("a: 1\nb: \"open\nc: 3\n"))
    #expect(error.message.contains("quoted scalar"))
    #expect(error.mark.line >= 2)
    #expect(error.mark.line <= 4)
}

@Test func badIndentation() throws {
    let error = try #require(parseError("a:\n  b: 1\n c: 2\n"))
    #expect(error.mark.line == 3)
    #expect(error.mark.column == 2)
    #expect(!error.message.isEmpty)
}

@Test func tabsAreAnError() throws {
    let error = try #require(parseError("a:\n\tb: 1\n"))
    #expect(error.mark == mark(2, 1))
    #expect(error.message.hasSuffix("YAML does not allow tabs for indentation"))
}

@Test func errorAtEndOfStreamPointsIntoTheText() throws {
    // libyaml itself reports 2:1 here, a line the text does not have.
    let error = try #require(parseError("{"))
    #expect(error.mark == mark(1, 2))
    #expect(error.message == "did not find expected node content (while parsing a flow node)")
}

@Test func controlCharacterReportsPosition() throws {
    let error = try #require(parseError("a: 1\nb: x\u{1}\n"))
    #expect(error.mark == mark(2, 5))
}

@Test func emptyStreams() throws {
    #expect(try YAML.parse("") == nil)
    #expect(try YAML.parse("\n\n   \n") == nil)
    #expect(try YAML.parse("# only a comment\n  # and another\n") == nil)
}

@Test func explicitEmptyDocumentIsNull() throws {
    #expect(try load("---\n").resolved == .null)
}

// MARK: - Hostile input

@Test func deepNesting() throws {
    let ok = String(repeating: "[", count: 256) + String(repeating: "]", count: 256)
    #expect(try YAML.parse(ok) != nil)

    let deep = String(repeating: "[", count: 257) + String(repeating: "]", count: 257)
    let error = try #require(parseError(deep))
    #expect(error.message == "nesting too deep")
    #expect(error.mark == mark(1, 257))

    // Unterminated and absurdly deep: must fail fast, not recurse.
    #expect(parseError(String(repeating: "[", count: 100_000))?.message == "nesting too deep")
    #expect(parseError(String(repeating: "{a: ", count: 100_000))?.message == "nesting too deep")
    #expect(parseError(String(repeating: "- ", count: 100_000)) != nil)
}

@Test func deepNestingThroughAliases() throws {
    let level = String(repeating: "[", count: 200) + String(repeating: "]", count: 200)
    let error = try #require(parseError("a: &a \(level)\nb: [[*a]]\nc: \(String(repeating: "[", count: 60))*a\(String(repeating: "]", count: 60))\n"))
    #expect(error.message == "nesting too deep")
    #expect(error.mark.line == 3)
}

@Test(.timeLimit(.minutes(1)))
func aliasBomb() throws {
    let bomb = """
        a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
        b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
        c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
        d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
        e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
        f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
        g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
        h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
        i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
        """
    let clock = ContinuousClock()
    let start = clock.now
    let error = try #require(parseError(bomb))
    #expect(clock.now - start < .seconds(5))
    #expect(error.message == "document expands to too many nodes (alias bomb?)")
    #expect(error.mark.line >= 6)
}

@Test func moderateAliasUseIsFine() throws {
    let doc = try load("""
        a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
        b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
        c: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
        """)
    #expect(doc["c"]?[9]?[9]?[9]?.resolved == .int(10))
}

@Test func garbageNeverCrashes() throws {
    let samples = [
        "\u{0}", "\u{FEFF}a: 1", "&", "*", "!", "!<>", "? ", ": ", "- - - -", "{", "}", "[", "]", "'", "\"\\x\"",
        "a: &x\nb: *x", "%YAML 1.1\n---\na", "%TAG ! tag:x,2000:\n--- !a b", "a: !<tag:yaml.org,2002:int> 1",
        "<<: *x", "<<: [1]", "? - a\n  - b\n: c", "a:\n  - b\n  c: d", "\t", "a\u{85}b", "- |\n\t x",
        "!!int", "!!float", "!!null ~", "{<<: {a: 1}, a: 2}", "&a &b c", "[a, b]: c",
    ]
    for sample in samples {
        _ = try? YAML.parse(sample)
    }
    #expect(try load("{<<: {a: 1}, a: 2}")["a"]?.resolved == .int(2))
}

// MARK: - Value types

@Test func markOrderingAndDescriptions() {
    #expect(mark(1, 9) < mark(2, 1))
    #expect(mark(2, 1) < mark(2, 3))
    #expect(!(mark(2, 3) < mark(2, 3)))
    #expect(mark(3, 9).description == "3:9")
    #expect(YAMLError(mark: mark(1, 2), message: "boom").description == "1:2: boom")
    let node = YAMLNode(kind: .sequence([]), mark: mark(1, 1))
    #expect(node.scalar == nil && node.mapping == nil && node.sequence?.isEmpty == true)
}
