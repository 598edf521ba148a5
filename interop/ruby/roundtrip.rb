# Debian's ruby-stomp (the Stomp gem 1.4): connect over TCP with STOMP 1.2 and heart-beats, send
# COUNT persistent messages with receipts, subscribe with client-individual acks, read and ack
# them, disconnect. Prints one JSON line.
#   ruby roundtrip.rb HOST PORT /queue/NAME COUNT
require 'json'
require 'stomp'

host, port, destination, count = ARGV[0], ARGV[1].to_i, ARGV[2], (ARGV[3] || 3).to_i
hash = {
  hosts: [{ login: '', passcode: '', host: host, port: port }],
  connect_headers: { 'accept-version' => '1.2', 'host' => 'localhost', 'heart-beat' => '500,500' },
  reliable: false,
}
conn = Stomp::Connection.new(hash)
receipts = []
count.times do |i|
  conn.publish(destination, "from ruby #{i}", { 'persistent' => 'true', 'receipt' => "r#{i}", 'note' => 'a:b' })
end
count.times { receipts << conn.receive.headers['receipt-id'] }
conn.subscribe(destination, { 'id' => 'sub-1', 'ack' => 'client-individual' })
received = []
count.times do
  msg = conn.receive
  received << { 'body' => msg.body, 'note' => msg.headers['note'], 'destination' => msg.headers['destination'] }
  conn.ack(msg.headers['ack'])
end
conn.disconnect(receipt: 'bye')
puts JSON.generate({ 'version' => conn.protocol, 'receipts' => receipts, 'received' => received })
