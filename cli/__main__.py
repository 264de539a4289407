from appliance.cli import main

main(prog_name="abhed")
