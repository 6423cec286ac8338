import FoundationEssentials
import HammockCore
import NIOHTTP1

/// The `rel="next"` target of a `Link` header (RFC 8288), as written (possibly relative).
///
/// `Link: <https://api.github.com/…?page=2>; rel="next", <https://api.github.com/…?page=5>; rel="last"`
func nextLink(in values: [String]) -> String? {
    for value in values {
        var rest = Substring(value)
        while let open = rest.firstIndex(of: "<") {
            guard let close = rest[open...].firstIndex(of: ">") else { break }
            let target = rest[rest.index(after: open)..<close]
            // The parameters run to the next link, which starts with "<" after a comma.
            var parametersEnd = rest.endIndex
            var index = rest.index(after: close)
            var inQuotes = false
            while index < rest.endIndex {
                let character = rest[index]
                if character == "\"" { inQuotes.toggle() }
                if character == "," && !inQuotes {
                    parametersEnd = index
                    break
                }
                index = rest.index(after: index)
            }
            let parameters = rest[rest.index(after: close)..<parametersEnd]
            for parameter in parameters.split(separator: ";") {
                let pair = parameter.split(separator: "=", maxSplits: 1)
                guard pair.count == 2, pair[0].trimmingSpacesAndTabs().lowercased() == "rel" else { continue }
                let relations = pair[1].trimmingSpacesAndTabs().trimming { $0 == "\"" }
                if relations.lowercased().split(separator: " ").contains("next") { return String(target) }
            }
            rest = parametersEnd < rest.endIndex ? rest[rest.index(after: parametersEnd)...] : ""
        }
    }
    return nil
}

/// A `Retry-After` longer than this is taken as this. The number comes from a server: without a bound,
/// turning it into milliseconds overflows (and crashed the plugin), and a day is plenty for a retry delay.
/// The engine applies the same bound.
let longestRetryAfter = 86_400

/// `Retry-After`: a number of seconds, or an HTTP date (then the time until it, never negative); at most
/// `longestRetryAfter` seconds either way.
func retryAfter(_ value: String, now: Date = Date()) -> Duration? {
    let text = value.trimmingSpacesAndTabs()
    if let seconds = wholeNumber(text) { return .seconds(min(seconds, longestRetryAfter)) }
    guard let date = parseHTTPDate(text) else { return nil }
    let interval = date.timeIntervalSince(now)
    guard interval.isFinite else { return nil }
    let seconds = min(max(0, interval), Double(longestRetryAfter))
    return .milliseconds(Int64((seconds * 1000).rounded(.up)))
}

/// An HTTP date in any of its three forms (RFC 9110 §5.6.7): IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`),
/// the only one a server may send today, and the obsolete RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and
/// asctime (`Sun Nov  6 08:49:37 1994`) forms, which a recipient must still accept.
func parseHTTPDate(_ text: String) -> Date? {
    let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    let (dayText, monthText, yearText, clockText): (Substring, Substring, Substring, Substring)
    if let comma = text.firstIndex(of: ",") {
        let parts = text[text.index(after: comma)...].split(whereSeparator: { $0 == " " || $0 == "-" })
        guard parts.count == 5, parts[4] == "GMT" || parts[4] == "UTC" else { return nil }
        (dayText, monthText, yearText, clockText) = (parts[0], parts[1], parts[2], parts[3])
    } else {
        // asctime has no zone: it is GMT.
        let parts = text.split(separator: " ")
        guard parts.count == 5 else { return nil }
        (dayText, monthText, yearText, clockText) = (parts[2], parts[1], parts[4], parts[3])
    }
    guard let day = Int(dayText), var year = Int(yearText), let month = months.firstIndex(of: monthText.lowercased())
    else { return nil }
    if yearText.count == 2 { year += year < 70 ? 2000 : 1900 }
    // A four-digit year, as the forms have: a year of twenty digits is no date, and the calendar's
    // arithmetic on it must not be what finds out.
    guard (1...9999).contains(year) else { return nil }
    let clock = clockText.split(separator: ":")
    guard clock.count == 3, let hour = Int(clock[0]), let minute = Int(clock[1]), let second = Int(clock[2]),
        (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
    else { return nil }
    var components = DateComponents()
    components.year = year
    components.month = month + 1
    components.day = day
    components.hour = hour
    components.minute = minute
    components.second = second
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = .gmt
    return calendar.date(from: components)
}

/// The media type of a `Content-Type` value, lowercased, without parameters.
func mediaType(_ contentType: String?) -> String? {
    guard let contentType else { return nil }
    // Empty pieces kept: in `; charset=utf-8` the type is missing, not `charset=utf-8`.
    let type = contentType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first
        .map { $0.trimmingSpacesAndTabs().lowercased() }
    return type?.isEmpty == false ? type : nil
}

/// `application/json`, `application/vnd.github+json`, `application/problem+json`, …
func isJSONMediaType(_ type: String?) -> Bool {
    guard let type else { return false }
    return type == "application/json" || type == "text/json" || type.hasSuffix("+json")
}

/// `application/x-ndjson`, `application/jsonl`, …: the names JSON Lines goes by.
func isJSONLinesMediaType(_ type: String?) -> Bool {
    guard let type else { return false }
    return ["application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines", "application/jsonlines"]
        .contains(type)
}

/// How long the server said its answer stays fresh, from its headers; nil when it said nothing usable. The
/// longest of what it said counts, each at most `longestRetryAfter` (a day):
///
/// - `Cache-Control: max-age=N` less the answer's `Age` (`s-maxage` is for shared caches, not for hammock);
///   `no-cache` and `no-store` say nothing about how soon to ask again, and `max-age=0` says now.
/// - `Expires`, counted from the server's own `Date` (so that the two machines' clocks need not agree), less
///   `Age`; ignored when `max-age` is there, as RFC 9111 says. An `Expires` that is not a date means
///   already expired.
/// - `X-Poll-Interval: N` (GitHub's: poll no more often than every N seconds).
///
/// A negative, non-numeric or absurd value is no advice: never a crash, never a source that stops.
func serverFreshness(_ headers: [(name: String, value: String)], now: Date = Date()) -> Duration? {
    func values(_ name: String) -> [String] {
        headers.filter { isHeaderName($0.name, name) }.map(\.value)
    }
    let age = values("age").first.flatMap { seconds($0) } ?? 0
    var freshFor: [Int] = []
    let directives = values("cache-control").flatMap { $0.split(separator: ",") }.map {
        $0.trimmingSpacesAndTabs().lowercased()
    }
    let maxAge = directives.lazy.compactMap { directive -> Int? in
        guard directive.hasPrefix("max-age=") else { return nil }
        return seconds(String(directive.dropFirst("max-age=".count)).trimming { $0 == "\"" })
    }.first
    if let maxAge {
        freshFor.append(max(0, maxAge - age))
    } else if let expires = values("expires").first {
        let origin = values("date").first.flatMap(parseHTTPDate) ?? now
        if let date = parseHTTPDate(expires.trimmingSpacesAndTabs()) {
            let interval = date.timeIntervalSince(origin)
            if interval.isFinite { freshFor.append(max(0, Int(min(interval, Double(longestRetryAfter))) - age)) }
        } else {
            freshFor.append(0)  // "0", or garbage: already expired
        }
    }
    if let interval = values("x-poll-interval").first.flatMap({ seconds($0) }) { freshFor.append(interval) }
    guard let longest = freshFor.max() else { return nil }
    return .seconds(min(longest, longestRetryAfter))
}

/// Whether the header name `name` is `lowercaseName` in any case (header names are ASCII), without making a
/// lowercased copy of every name of every answer, as each poll would.
func isHeaderName(_ name: String, _ lowercaseName: String) -> Bool {
    guard name.utf8.count == lowercaseName.utf8.count else { return false }
    return zip(name.utf8, lowercaseName.utf8).allSatisfy { byte, lower in
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 == lower : byte == lower
    }
}

/// A header's number of seconds, at most a day; nil when it is not a whole number.
private func seconds(_ text: String) -> Int? {
    wholeNumber(text).map { min($0, longestRetryAfter) }
}

/// A header's whole number: digits only (no sign, no fraction), around blanks; digits past `Int`'s range
/// are `Int.max` (a very long time is still advice). Nil otherwise.
func wholeNumber(_ text: String) -> Int? {
    let trimmed = text.trimmingSpacesAndTabs()
    guard !trimmed.isEmpty, trimmed.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return nil }
    return Int(trimmed) ?? Int.max
}

/// Whether the answer says it must not be kept (`Cache-Control: no-store`, in any of its headers, any case).
func forbidsStoring(_ headers: HTTPHeaders) -> Bool {
    headers["cache-control"].lazy.flatMap { $0.split(separator: ",") }.contains {
        $0.trimmingSpacesAndTabs().lowercased() == "no-store"
    }
}

/// How long an answer stays fresh: the longest of what its headers say and what its origin's rate limit asks.
func freshness(_ headers: HTTPHeaders, spread: Duration?) -> Duration? {
    [serverFreshness(headers), spread].compactMap { $0 }.max()
}

/// The same, from the response's headers.
func serverFreshness(_ headers: HTTPHeaders, now: Date = Date()) -> Duration? {
    serverFreshness(headers.map { (name: $0.name, value: $0.value) }, now: now)
}
