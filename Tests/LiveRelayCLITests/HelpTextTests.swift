import ArgumentParser
import Testing

@testable import liverelay

/// `--help` off a terminal is wrapped at 80 columns by ArgumentParser, which breaks any longer
/// line of a discussion where the 80th column falls, leaving a short remnant after each: every
/// line of every command's discussion is written to fit, so that it is shown as written.
@Suite struct HelpTextTests {
    @Test func everyCommandsDiscussionFitsEightyColumns() {
        #expect(LiveRelayCommand.commands.count > 15, "the whole tree, not the root alone")
        for (path, command) in LiveRelayCommand.commands {
            for line in command.configuration.discussion.split(separator: "\n") {
                #expect(line.count < 80, "\(path.joined(separator: " ")): \(line)")
            }
        }
    }
}
