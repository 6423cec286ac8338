import HammockJSON
import Testing

@Suite struct Numbers {
    @Test func doubleFormatting() {
        #expect(JSONNumber(3.0).text == "3")
        #expect(JSONNumber(-3.0).text == "-3")
        #expect(JSONNumber(0.1).text == "0.1")
        #expect(JSONNumber(1e300).text == "1e+300")
        #expect(JSONNumber(-2.5e-7).text == "-2.5e-7")
        #expect(JSONNumber(1e-5).text == "1e-5")
        #expect(JSONNumber(0.0).text == "0")
        #expect(JSONNumber(-0.0).text == "-0")
        #expect(JSONNumber(9_007_199_254_740_992.0).text == "9007199254740992")
        #expect(JSONNumber(1e16).text == "1e+16")
        #expect(JSONNumber(123456.789).text == "123456.789")
        #expect(JSONNumber(Double.leastNonzeroMagnitude).text == "5e-324")
        #expect(JSONNumber(Double.greatestFiniteMagnitude).text == "1.7976931348623157e+308")
    }

    @Test func formattedDoublesAreValidAndRoundTrip() {
        for value in [0.1, 1e300, -2.5e-7, 1e-5, Double.leastNonzeroMagnitude, 1e16, 1.5e20, 123.456, -1e-300, 9_007_199_254_740_994.0] {
            let number = JSONNumber(value)
            #expect(JSONNumber(text: number.text) != nil, "\(number.text)")
            #expect(number.doubleValue == value)
        }
    }

    @Test func nonFiniteDoubles() {
        #expect(JSONNumber(exactly: .nan) == nil)
        #expect(JSONNumber(exactly: .infinity) == nil)
        #expect(JSONNumber(exactly: -.infinity) == nil)
        #expect(JSONNumber(exactly: 2.0)?.text == "2")
    }

    @Test func textValidation() {
        for valid in ["0", "-0", "1.5", "1e5", "1E+5", "-1.25e-10", "12345678901234567890"] {
            #expect(JSONNumber(text: valid)?.text == valid)
        }
        for invalid in ["", " 1", "1 ", "+1", "01", "1.", ".1", "1e", "NaN", "-", "0x1", "1_000", "--1"] {
            #expect(JSONNumber(text: invalid) == nil, "\(invalid)")
        }
    }

    @Test func intValueIsExactOnly() {
        #expect(JSONNumber(text: "42")?.intValue == 42)
        #expect(JSONNumber(text: "-7")?.intValue == -7)
        #expect(JSONNumber(text: "-0")?.intValue == 0)
        #expect(JSONNumber(text: "1e3")?.intValue == 1000)
        #expect(JSONNumber(text: "2.50e1")?.intValue == 25)
        #expect(JSONNumber(text: "10e-1")?.intValue == 1)
        #expect(JSONNumber(text: "0.0e99999")?.intValue == 0)
        #expect(JSONNumber(text: "9223372036854775807")?.intValue == Int.max)
        #expect(JSONNumber(text: "-9223372036854775808")?.intValue == Int.min)
        #expect(JSONNumber(text: "9223372036854775808")?.intValue == nil)
        #expect(JSONNumber(text: "1.5")?.intValue == nil)
        #expect(JSONNumber(text: "1e-1")?.intValue == nil)
        #expect(JSONNumber(text: "1e19")?.intValue == nil)
        #expect(JSONNumber(text: "1e999999999999999999")?.intValue == nil)
        #expect(JSONNumber(text: "1e-999999999999999999")?.intValue == nil)
    }

    @Test func doubleValue() {
        #expect(JSONNumber(text: "1.0e+5")?.doubleValue == 100_000)
        #expect(JSONNumber(text: "-0")?.doubleValue.sign == .minus)
        #expect(JSONNumber(text: "1e400")?.doubleValue == .infinity)
    }

    @Test func literalsAndInts() {
        let fromInt: JSONNumber = 12
        let fromFloat: JSONNumber = 2.5
        #expect(fromInt.text == "12")
        #expect(fromFloat.text == "2.5")
        #expect(JSONNumber(Int.min).text == "-9223372036854775808")
        #expect(JSONNumber(7).description == "7")
    }
}

@Suite struct Pointers {
    @Test func parsingAndEscapes() {
        #expect(JSONPointer("")?.tokens == [])
        #expect(JSONPointer("/")?.tokens == [""])
        #expect(JSONPointer("/a~1b/~0c")?.tokens == ["a/b", "~c"])
        #expect(JSONPointer("/~01")?.tokens == ["~1"])
        #expect(JSONPointer("/a//b")?.tokens == ["a", "", "b"])
        #expect(JSONPointer("/a~1b/~0c")?.description == "/a~1b/~0c")
        #expect(JSONPointer(tokens: ["~1", "a/"]).description == "/~01/a~1")
        #expect(JSONPointer("/a")?.appending("b/c").description == "/a/b~1c")
        #expect(JSONPointer("/é")?.tokens == ["é"])
    }

    @Test func invalidPointers() {
        for text in ["a", "a/b", "/~", "/~2", "/a~", "/~a", "#/a"] {
            #expect(JSONPointer(text) == nil, "\(text)")
        }
    }

    @Test func resolving() throws {
        let document = try JSONValue(parsing: #"{"a/b":{"~c":[10,20,{"x":null}]},"":1,"list":[0,1,2,3,4,5,6,7,8,9,10,11,12]}"#)
        #expect(document[JSONPointer("")!] == document)
        #expect(document[JSONPointer("/a~1b/~0c/1")!] == 20)
        #expect(document[JSONPointer("/a~1b/~0c/2/x")!] == .null)
        #expect(document[JSONPointer("/")!] == 1)
        #expect(document[JSONPointer("/list/12")!] == 12)
        #expect(document[JSONPointer("/list/0")!] == 0)
    }

    @Test func unresolvablePointers() throws {
        let document = try JSONValue(parsing: #"{"list":[0,1,2],"s":"x"}"#)
        for text in ["/list/01", "/list/-", "/list/3", "/list/+1", "/list/-1", "/list/ 1", "/list/", "/missing", "/s/0", "/list/1/x", "/list/99999999999999999999999"] {
            #expect(document[JSONPointer(text)!] == nil, "\(text)")
        }
    }
}
